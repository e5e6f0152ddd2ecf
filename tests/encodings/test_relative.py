import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pebench.encodings import attention as base
from pebench.encodings import relative as relative_module
from pebench.encodings.base import Site
from pebench.encodings.relative import Relative, relative_offset_index
from pebench.model.transformer import ModelConfig
from tests.helpers import build, spy_on_tiles

SELF = Site("decoder", 0, "self")


def test_offset_index_is_clipped():
    # By hand: clip(j - i, 2) + 2 for i, j in 0..4.
    expected = torch.tensor([
        [2, 3, 4, 4, 4],
        [1, 2, 3, 4, 4],
        [0, 1, 2, 3, 4],
        [0, 0, 1, 2, 3],
        [0, 0, 0, 1, 2],
    ])
    assert torch.equal(relative_offset_index(torch.arange(5), torch.arange(5), 2), expected)


def pairwise_formula(q, k, v, allowed, key_vectors, value_vectors, clip, positions=None):
    """Shaw et al. eq. 3-4 written naively, with explicit [s, s, d_h] tensors a^K_ij, a^V_ij
    built by a loop over (i, j) at the given positions (default 0..s-1)."""
    positions = list(range(q.shape[2])) if positions is None else positions.tolist()
    index = [[max(-clip, min(clip, j - i)) + clip for j in positions] for i in positions]
    a_key = torch.stack([torch.stack([key_vectors[r] for r in row]) for row in index])  # [s, s, d_h]
    a_value = torch.stack([torch.stack([value_vectors[r] for r in row]) for row in index])
    logits = torch.einsum("bhid,bhijd->bhij", q, k[:, :, None] + a_key) / math.sqrt(q.shape[-1])
    weights = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
    return torch.einsum("bhij,bhijd->bhid", weights, v[:, :, None] + a_value)


CASES = {  # (tokens, k, block bytes): the blocks, as (query rows, keys), of causal attention
    (7, 3, 1 << 20): [(2, 2), (2, 4), (2, 6), (1, 7)],  # 2 rows a chunk, not more than k: Gathered
    (7, 3, 2 * 7 * 8): [(1, n) for n in range(1, 8)] * 2,  # one query row a block
    (37, 4, 1 << 20): [(10, 10), (10, 20), (10, 30), (7, 37)],  # more than k rows a chunk: Banded
    (37, 4, 2 * 10 * 37 * 8): [(10, 10), (10, 20), (10, 30), (7, 37)] * 2,  # one example a block
    (17, 4, 1 << 20): [(5, 5), (5, 10), (5, 15), (2, 17)],  # Banded, the last chunk of k rows or fewer
}


@pytest.mark.parametrize("s, clip, block_bytes", CASES)
@pytest.mark.parametrize("mask", ["causal", "said causal", "padding"])
def test_matches_the_papers_pairwise_formula(s, clip, block_bytes, mask):
    # Eq. 3-4 written naively, in values and in the gradients of q, k, v, w^K and w^V, whole or
    # cut into blocks, causal (attention the model says is causal is cut into row chunks with fewer
    # keys, whose buckets are read along diagonals when chunks have more than k rows) or with
    # encoder key padding.
    relative = Relative(ModelConfig(d_model=16, n_heads=2).geometry(64), clip=clip).double()
    b, h, d_h = 2, 2, 8
    q, k, v = (torch.randn(b, h, s, d_h, dtype=torch.float64, requires_grad=True) for _ in range(3))
    allowed = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
    if mask == "padding":  # [b, 1, 1, s]: the last 3 keys of example 1 are padding
        allowed = torch.ones(b, 1, 1, s, dtype=torch.bool)
        allowed[1, ..., s - 3:] = False
    inputs = (q, k, v, relative.key_vectors, relative.value_vectors)
    gradient = torch.randn(b, h, s, d_h, dtype=torch.float64)
    expected = pairwise_formula(q, k, v, allowed, relative.key_vectors[0], relative.value_vectors[0], clip)
    expected_grads = torch.autograd.grad((expected * gradient).sum(), inputs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "TILE_BYTES", block_bytes)
        plans, kinds, blocks = spy_on_tiles(patch, relative_module), [], relative_module._blocks

        def spy_on_kinds(*args):
            made = blocks(*args)
            kinds.extend(type(chunk).__name__ for _, chunk in made)
            return made

        patch.setattr(relative_module, "_blocks", spy_on_kinds)
        out = relative.attend(q, k, v, torch.arange(s), torch.arange(s), allowed, SELF, causal=mask == "said causal")  # the same mask
        grads = torch.autograd.grad((out * gradient).sum(), inputs)
    assert len(plans) == 1  # backward walks the blocks of forward
    if mask == "said causal":
        assert plans[0] == CASES[s, clip, block_bytes]
        assert set(kinds) == {"Banded" if plans[0][0][0] > clip else "Gathered"}
    else:
        assert {n for _, n in plans[0]} == {s} and set(kinds) == {"Gathered"}
    torch.testing.assert_close(out, expected)
    for got, wanted in zip(grads, expected_grads):
        torch.testing.assert_close(got, wanted)


def test_causal_blocks_are_banded_when_the_first_chunk_has_more_than_k_rows():
    from pebench.encodings.relative import Banded, Gathered, _blocks

    key_vectors = torch.zeros(9, 8)  # k = 4

    def kinds(s: int, banded: bool = True) -> set[type]:
        q, pos = torch.zeros(2, 2, s, 8), torch.arange(s)
        return {type(chunk) for _, chunk in _blocks(base.attention_tiles(q, q, causal=True), pos, pos, key_vectors, banded)}

    assert kinds(37) == {Banded}  # chunks of 10, 10, 10 and 7 rows
    assert kinds(17) == {Banded}  # 5, 5, 5 and 2: the last starts past key 4
    assert kinds(16) == {Gathered}  # 4 rows a chunk
    assert kinds(37, banded=False) == {Gathered}


def test_causal_attention_at_positions_with_gaps_gathers_the_buckets():
    # Randomized positional encodings give sorted positions with gaps: the buckets no longer
    # follow the diagonals, and the blocks must gather them (37 tokens, k = 4: 10 rows a chunk).
    relative = Relative(ModelConfig(d_model=16, n_heads=2).geometry(64), clip=4).double()
    positions = torch.randperm(80, generator=torch.Generator().manual_seed(0))[:37].sort().values
    q, k, v = (torch.randn(2, 2, 37, 8, dtype=torch.float64) for _ in range(3))
    allowed = base.causal_mask(37, torch.device("cpu"))
    expected = pairwise_formula(q, k, v, allowed, relative.key_vectors[0], relative.value_vectors[0], 4, positions)
    torch.testing.assert_close(relative.attend(q, k, v, positions, positions, allowed, SELF, causal=True), expected)


def test_evaluation_keeps_one_block_of_attention_weights_at_a_time():
    # 1,024 tokens, 4 heads, in blocks of 1 MiB: the causal weights of one layer take 10 MiB.
    # Over NoPE's evaluation peak, relative adds about 3 MiB; keeping every block, about 9.
    from pebench.bench.throughput import peak_memory_mb

    tokens = torch.randint(4, 20, (1, 1024))
    peaks = {}
    for encoding in ("nope", "relative"):
        model = build(encoding, max_length=1024).eval()
        with pytest.MonkeyPatch.context() as patch, torch.no_grad():
            patch.setattr(base, "TILE_BYTES", 1 << 20)
            peaks[encoding] = peak_memory_mb(lambda: model(tokens), torch.device("cpu"))
    assert peaks["nope"] >= 1 and peaks["relative"] - peaks["nope"] < 5


def test_parameters_are_per_layer_and_shared_across_heads():
    relative = Relative(ModelConfig(d_model=16, n_heads=2, n_layers=3).geometry(32), clip=16)
    assert relative.key_vectors.shape == (3, 33, 8)


def test_no_tensor_of_size_batch_heads_length_length_head_width_is_made():
    # Training step at 256 tokens: every tensor torch creates in the forward and backward pass is
    # watched; Shaw's formula written naively would make one [b, h, L, L, d_h].
    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(tensor, torch.Tensor):
                    Largest.numel = max(Largest.numel, tensor.numel())
            return out

    model = build("relative", max_length=256)
    b, length = 2, 256
    tokens = torch.randint(4, 20, (b, length))
    with Largest():
        model(tokens).sum().backward()
    h, d_h = model.config.n_heads, model.config.d_model // model.config.n_heads
    assert 0 < Largest.numel < b * h * length * length * d_h
    # attention weights were seen: the last of the 4 causal row chunks, both examples at once
    assert Largest.numel >= b * h * (length // 4) * length
