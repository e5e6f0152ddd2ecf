import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pebench.encodings import base
from pebench.encodings import relative as relative_module
from pebench.encodings.base import Site
from pebench.encodings.relative import Relative, relative_offset_index
from pebench.model import ModelConfig
from tests.helpers import build, spy_on_blocks

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


@pytest.mark.parametrize("block_bytes", [1 << 20, 2 * 7 * 8])  # one block; one query row a block
@pytest.mark.parametrize("mask", ["causal", "shared causal", "padding"])
def test_matches_the_papers_pairwise_formula(block_bytes, mask):
    # Shaw et al. eq. 3-4 computed naively with an explicit [b, h, s, s, d_h] tensor, in values
    # and gradients, whole or cut into blocks (attention_blocks), causal (the model's shared causal mask
    # is cut into row chunks with fewer keys) or with encoder key padding.
    relative = Relative(ModelConfig(d_model=16, n_heads=2).geometry(32), clip=3).double()
    b, h, s, d_h = 2, 2, 7, 8
    q, k, v = (torch.randn(b, h, s, d_h, dtype=torch.float64, requires_grad=True) for _ in range(3))
    allowed = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
    if mask == "padding":  # [b, 1, 1, s]: the last 3 keys of example 1 are padding
        allowed = torch.ones(b, 1, 1, s, dtype=torch.bool)
        allowed[1, ..., 4:] = False
    aK = torch.empty(s, s, d_h, dtype=torch.float64)
    aV = torch.empty(s, s, d_h, dtype=torch.float64)
    for i in range(s):
        for j in range(s):
            r = max(-3, min(3, j - i)) + 3
            aK[i, j], aV[i, j] = relative.key_vectors[0, r].detach(), relative.value_vectors[0, r].detach()
    logits = torch.einsum("bhid,bhijd->bhij", q, k[:, :, None] + aK) / math.sqrt(d_h)
    weights = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
    expected = torch.einsum("bhij,bhijd->bhid", weights, v[:, :, None] + aV)
    expected.square().sum().backward()
    expected_grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "BLOCK_BYTES", block_bytes)
        plans = spy_on_blocks(patch, relative_module)
        given = base.causal_mask(s, torch.device("cpu")) if mask == "shared causal" else allowed  # the same mask
        out = relative.attend(q, k, v, torch.arange(s), torch.arange(s), given, SELF)
        out.square().sum().backward()
    keys = [n for _, n in plans[0]]  # keys each block scores
    assert plans[1] == plans[0]  # backward walks the blocks of forward
    if mask == "shared causal":  # row chunks (2 rows, or 1 in 1-row blocks), each with keys up to its last row
        assert keys == ([2, 4, 6, 7] if block_bytes == 1 << 20 else list(range(1, 8)) * b)
    else:
        assert set(keys) == {s}
    torch.testing.assert_close(out, expected)
    for got, wanted in zip((t.grad for t in (q, k, v)), expected_grads):
        torch.testing.assert_close(got, wanted)


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
