import pytest
import torch

from pebench.model.batching import pack
from pebench.encodings.base import PositionalEncoding, Site
from pebench.model.transformer import Attention, ModelConfig, project
from pebench.tasks.base import Example
from tests.helpers import BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE, DETERMINISTIC, build, relative_error, spy_on_tiles

ARCHITECTURES = ["decoder", "encoder_decoder"]


def examples(lengths):
    g = torch.Generator().manual_seed(1)
    return [Example(tuple(torch.randint(0, 16, (n,), generator=g).tolist()), tuple(torch.randint(0, 16, (n,), generator=g).tolist()), n) for n in lengths]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("encoding", BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE)
def test_example_alone_equals_example_in_a_longer_batch(encoding, architecture):
    model = build(encoding, architecture, **DETERMINISTIC.get(encoding, {})).eval()
    batch_examples = examples([3, 11, 7])
    alone, batch = pack(batch_examples[:1], architecture), pack(batch_examples, architecture)
    with torch.no_grad():
        single = model(alone.tokens, alone.source)
        batched = model(batch.tokens, batch.source)
    width = single.shape[1]
    torch.testing.assert_close(batched[0, :width], single[0], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(batched).all()


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("encoding", BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE)
def test_padded_keys_get_no_weight_and_gradients_are_finite(encoding, architecture):
    model = build(encoding, architecture).train()
    batch = pack(examples([1, 9]), architecture)
    logits = model(batch.tokens, batch.source)
    logits.sum().backward()
    assert torch.isfinite(logits).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_causal_outputs_do_not_see_the_future():
    model = build("rope").eval()
    tokens = torch.randint(1, 20, (1, 10))
    changed = tokens.clone()
    changed[0, 7:] = (changed[0, 7:] % 19) + 1
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[0, :7], model(changed)[0, :7])


class FixedProjectionBiases(PositionalEncoding):
    """Per-position biases of the q and k/v projections, drawn once: [max_length, d] and [max_length, 2d]."""

    def __init__(self, geometry):
        super().__init__(geometry)
        self.query_table = torch.nn.Parameter(torch.randn(geometry.max_length, geometry.d_model))
        self.key_value_table = torch.nn.Parameter(torch.randn(geometry.max_length, 2 * geometry.d_model))

    def query_bias(self, pos, site):
        return self.query_table[pos]

    def key_value_bias(self, pos, site):
        return self.key_value_table[pos]


@pytest.mark.parametrize("kind", ["self", "cross"])
def test_projection_biases_are_added_to_each_position_of_q_k_and_v_in_values_and_gradients(kind):
    torch.manual_seed(0)
    config = ModelConfig(d_model=8, n_heads=2, n_layers=1, architecture="encoder_decoder")
    encoding = FixedProjectionBiases(config.geometry(10)).double()
    attention = Attention(config, Site("decoder", 0, kind)).double()
    x, q_pos = torch.randn(3, 6, 8, dtype=torch.float64, requires_grad=True), torch.tensor([0, 1, 2, 5, 7, 9])
    if kind == "self":  # causal
        memory, k_pos, allowed = x, q_pos, torch.ones(6, 6, dtype=torch.bool).tril()
    else:  # five source tokens at their own positions
        memory, k_pos = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True), torch.tensor([8, 3, 0, 4, 6])
        allowed = torch.ones(6, 5, dtype=torch.bool)
    out = attention(x, memory, q_pos, k_pos, allowed, encoding)
    # written out: q_i = x_i W_q^T + c_q + b_q(q_pos_i), [k_j, v_j] likewise at k_pos_j, then softmax attention
    q = x @ attention.query.weight.T + attention.query.bias + encoding.query_table[q_pos]
    k, v = (memory @ attention.key_value.weight.T + attention.key_value.bias + encoding.key_value_table[k_pos]).split(8, -1)
    heads = [t.view(3, -1, 2, 4).transpose(1, 2) for t in (q, k, v)]
    scores = (heads[0] @ heads[1].transpose(-1, -2) / 2).masked_fill(~allowed, float("-inf"))
    expected = attention.out((scores.softmax(-1) @ heads[2]).transpose(1, 2).reshape(3, 6, 8))
    torch.testing.assert_close(out, expected)
    weights = torch.randn_like(out)
    inputs = (x, memory, encoding.query_table, encoding.key_value_table, *attention.query.parameters(), *attention.key_value.parameters())
    got, want = (torch.autograd.grad((y * weights).sum(), inputs, allow_unused=kind == "self") for y in (out, expected))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_a_projection_bias_is_cast_to_the_projections_dtype_and_checked_for_shape():
    linear, x = torch.nn.Linear(8, 6).bfloat16(), torch.randn(2, 5, 8).bfloat16()
    bias = torch.randn(5, 6)  # float32, as FLOATER's solution beside a bf16 model
    out = project(linear, x, bias)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), linear(x).float() + bias, atol=0.05, rtol=0.02)
    with pytest.raises(ValueError, match=r"must be \[sequence, 6\] = \[5, 6\]; the encoding's query_bias or key_value_bias returned \[1, 6\]"):
        project(linear, x, bias[:1])


def test_model_rejects_bad_shapes():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="architecture must be one of"):
        ModelConfig(architecture="seq2seq")


def test_the_causal_word_takes_the_is_causal_path_with_the_same_answer():
    from pebench.encodings import attention as base

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    mask = base.causal_mask(6, q.device)
    logits = (q @ k.transpose(-1, -2)) / 2.0  # sqrt(d_h) = 2
    logits = logits.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    expected = logits.softmax(-1) @ v
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base.F, "scaled_dot_product_attention", spy)
        fast = base.scaled_dot_product(q, k, v, mask, causal=True)
        explicit = base.scaled_dot_product(q, k, v, mask)  # the same mask, without the caller's word: the mask path
    assert calls == [{"is_causal": True}, {"attn_mask": calls[1]["attn_mask"]}]
    torch.testing.assert_close(fast, expected)
    torch.testing.assert_close(explicit, expected)


BLOCKS = {1 << 20: 1, 2 * 7 * 3 * 7 * 8: 3, 3 * 3 * 7 * 8: 15, 3 * 7 * 8: 35}  # block bytes -> blocks, for [5, 3, 7, 7] float64 scores


def blocked_against_whole(seed: int, allowed: torch.Tensor, given: torch.Tensor, block_bytes: int, causal: bool = False) -> list[tuple[int, int]]:
    """Biased attention ([5, 3, 7, 4] float64, a learned [1, h, s, s] bias with a gradient, as
    T5's) through scaled_dot_product with the mask ``given``, cut into blocks of block_bytes,
    against the whole softmax written out with ``allowed``, in values and gradients. Returns each
    block's (query rows, keys)."""
    from pebench.encodings import attention as base

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(5, 3, 7, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.randn(1, 3, 7, 7, generator=g, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(5, 3, 7, 4, generator=g, dtype=torch.float64)
    expected = ((q @ k.transpose(-1, -2)) / 2.0 + bias).masked_fill(~allowed, float("-inf")).softmax(-1) @ v  # sqrt(d_h) = 2
    (expected * weights).sum().backward()
    expected_grads = [t.grad.clone() for t in (q, k, v, bias)]
    for t in (q, k, v, bias):
        t.grad = None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "TILE_BYTES", block_bytes)
        plan = spy_on_tiles(patch, base)
        got = base.scaled_dot_product(q, k, v, given, bias, causal)
        (got * weights).sum().backward()
    torch.testing.assert_close(got, expected)
    for got_grad, expected_grad in zip((t.grad for t in (q, k, v, bias)), expected_grads):
        torch.testing.assert_close(got_grad, expected_grad)
    return plan[0]


@pytest.mark.parametrize("block_bytes", BLOCKS)  # the whole batch; 2 examples a block; 3 query rows; 1 row
@pytest.mark.parametrize("padding", [False, True])
def test_blocked_attention_equals_the_whole_softmax_in_values_and_gradients(block_bytes, padding):
    allowed = torch.ones(7, 7, dtype=torch.bool).tril()[None, None]  # [1, 1, 7, 7], without the causal word: the mask path
    if padding:  # encoder-style key padding: [b, 1, 1, s_k], the last 2 keys of examples 1 and 3
        allowed = torch.ones(5, 1, 1, 7, dtype=torch.bool)
        allowed[[1, 3], ..., 5:] = False
    assert len(blocked_against_whole(0, allowed, allowed, block_bytes)) == BLOCKS[block_bytes]


@pytest.mark.parametrize("block_bytes, blocks", [(1 << 20, 4), (2 * 3 * 7 * 8, 20)])  # one group of 5 examples; 1 example a group
def test_causal_attention_scores_each_row_chunk_against_the_keys_up_to_its_last_row(block_bytes, blocks):
    # Causal biased attention is computed in 4 chunks of query rows
    # (2, 2, 2, 1 of 7), each with keys 0..its last row.
    from pebench.encodings import attention as base

    tril = torch.ones(7, 7, dtype=torch.bool).tril()
    calls = blocked_against_whole(2, tril, base.causal_mask(7, torch.device("cpu")), block_bytes, causal=True)
    assert len(calls) == blocks and calls[:4] == [(2, 2), (2, 4), (2, 6), (1, 7)]  # (query rows, keys)


def test_blocks_are_sized_by_the_widest_tensor_per_pair(monkeypatch):
    # float32, 2 heads, 8 keys: a row of scores is 2 * 8 * 4 = 64 bytes, so 1,024 bytes hold 16
    # rows, 2 examples of 8; with 8 values per pair (DAPE's MLP width) a row is 256 bytes: 4 rows
    # of one example.
    from pebench.encodings import attention as base

    monkeypatch.setattr(base, "TILE_BYTES", 1024)
    q = torch.zeros(6, 2, 8, 4)
    by_scores, by_width = base.attention_tiles(q, q, causal=False), base.attention_tiles(q, q, causal=False, pair_values=8)
    assert [(e.start, e.stop, r.start, r.stop) for e, r, _ in by_scores] == [(0, 2, 0, 8), (2, 4, 0, 8), (4, 6, 0, 8)]
    assert [(e.start, e.stop, r.start, r.stop) for e, r, _ in by_width] == [(i, i + 1, row, row + 4) for i in range(6) for row in (0, 4)]


def test_causal_blocks_refuse_unequal_query_and_key_lengths():
    from pebench.encodings import attention as base

    q, k = torch.zeros(1, 1, 7, 4), torch.zeros(1, 1, 9, 4)
    with pytest.raises(ValueError, match="needs as many queries as keys; got 7 and 9"):
        base.attention_tiles(q, k, causal=True)


@pytest.mark.parametrize("bias_shape", [(3, 7, 9), (7, 9), (2, 1, 7, 9)])  # per head; shared by heads; per example
def test_blocked_attention_takes_unequal_lengths_and_masks_of_any_rank(bias_shape):
    # Cross-attention shapes (7 queries, 9 keys), a 2-D mask and a bias of rank 2 to 4, cut into
    # 1-row blocks; the gradient of a bias broadcast over heads or examples is summed over them.
    from pebench.encodings import attention as base

    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, 7, 4, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 3, 9, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    bias = torch.randn(bias_shape, generator=g, dtype=torch.float64, requires_grad=True)
    allowed = torch.rand(7, 9, generator=g) > 0.3
    allowed[:, 0] = True  # every row allows a key
    weights = torch.randn(2, 3, 7, 4, generator=g, dtype=torch.float64)
    expected = ((q @ k.transpose(-1, -2)) / 2.0 + bias).masked_fill(~allowed, float("-inf")).softmax(-1) @ v
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v, bias))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "TILE_BYTES", 1)
        got = base.scaled_dot_product(q, k, v, allowed, bias)
        grads = torch.autograd.grad((got * weights).sum(), (q, k, v, bias))
    torch.testing.assert_close(got, expected)
    for got_grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(got_grad, expected_grad)


@pytest.mark.parametrize("encoding, length", [("t5", 64), ("relative", 64), ("relative", 8), ("flow", 64)])  # relative: Banded; Gathered
def test_training_under_bf16_autocast_gives_gradients_near_fp32(encoding, length):
    # On CUDA, training runs under bf16 autocast; a custom Function's backward runs outside it
    # unless it enters it again, and then mixes bf16 activations with fp32 parameters (T5,
    # relative); FLOATER's fp32 biases enter a bf16 product (project). The CPU's bf16 autocast
    # takes the same paths here: the gradients must come, and be near fp32's.
    model, tokens = build(encoding, max_length=length), torch.randint(4, 20, (2, length), generator=torch.Generator().manual_seed(0))

    def gradients(autocast: bool) -> list[torch.Tensor]:
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(tokens).float().logsumexp(-1).mean()
        loss.backward()
        return [p.grad.clone() for p in model.encoding.parameters()]

    exact, mixed = gradients(False), gradients(True)
    assert exact and all(g.dtype == torch.float32 for g in mixed)
    for e, m in zip(exact, mixed, strict=True):
        assert relative_error(m, e) <= 0.1


def test_the_model_says_causal_for_a_decoders_full_self_attention_only():
    # The causal path is chosen by the model's word, not recognised from the mask: a full pass of
    # decoder self-attention says causal; cross-attention, the encoder and cached decoding do not.
    from tests.helpers import build

    said = []
    for architecture in ("decoder", "encoder_decoder", "encoder"):
        model = build("nope", architecture).eval()
        attend = model.encoding.attend
        model.encoding.attend = lambda *args, **kwargs: said.append((architecture, args[6].stack, args[6].kind, args[7])) or attend(*args, **kwargs)
        tokens, source = torch.randint(4, 20, (2, 5)), torch.randint(4, 20, (2, 4)) if architecture == "encoder_decoder" else None
        with torch.no_grad():
            model(tokens, source)
            if architecture != "encoder":
                model.decode(tokens[:, :3], torch.arange(3), {}, model.encode(source) if source is not None else None)
    causal = {(a, stack, kind) for a, stack, kind, c in said if c}
    assert causal == {("decoder", "decoder", "self"), ("encoder_decoder", "decoder", "self")}
    assert sum(c for *_, c in said) == 4  # two layers each, in the full passes only (not in decode)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("encoding", ["cope", "dape"])
def test_a_bias_made_block_by_block_gives_the_whole_answer(encoding, architecture):
    # CoPE and DAPE make their bias from q and k one block at a time (tiled_attention): in blocks
    # of one example and one query row (the decoder's in its 4 causal chunks), the outputs and
    # gradients equal the whole batch's in one block (no causal chunks either).
    from pebench.encodings import attention as base

    batch = pack(examples([3, 11, 7]), architecture)
    outputs, gradients = [], []
    for block_bytes, chunks in ((1 << 30, 1), (1, base.CAUSAL_CHUNKS)):
        model = build(encoding, architecture).double().train()
        with torch.no_grad():  # CoPE's position table starts at 0 (no term at all): every parameter drawn
            for parameter in model.encoding.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(parameter.numel()), dtype=torch.float64))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(base, "TILE_BYTES", block_bytes)
            patch.setattr(base, "CAUSAL_CHUNKS", chunks)
            plans = spy_on_tiles(patch, base)
            logits = model(batch.tokens, batch.source)
            gradients.append(torch.autograd.grad(logits.square().sum(), list(model.encoding.parameters())))
        outputs.append(logits)
        if block_bytes == 1:
            assert plans and all(rows == 1 for plan in plans for rows, _ in plan)
        else:
            assert plans and all(len(plan) == 1 for plan in plans)
    torch.testing.assert_close(outputs[1], outputs[0])
    for tiled, whole in zip(*gradients, strict=True):
        torch.testing.assert_close(tiled, whole)
