import math

import torch

from pebench.encodings.base import Site
from pebench.encodings.relative import Relative, relative_offset_index
from pebench.model import ModelConfig

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


def test_matches_the_papers_pairwise_formula():
    # Shaw et al. eq. 3-4 computed naively with an explicit [b, h, s, s, d_h] tensor.
    relative = Relative(ModelConfig(d_model=16, n_heads=2).geometry(32), clip=3)
    b, h, s, d_h = 2, 2, 7, 8
    q, k, v = torch.randn(b, h, s, d_h), torch.randn(b, h, s, d_h), torch.randn(b, h, s, d_h)
    allowed = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
    aK = torch.empty(s, s, d_h)
    aV = torch.empty(s, s, d_h)
    for i in range(s):
        for j in range(s):
            r = max(-3, min(3, j - i)) + 3
            aK[i, j], aV[i, j] = relative.key_vectors[0, r], relative.value_vectors[0, r]
    logits = torch.einsum("bhid,bhijd->bhij", q, k[:, :, None] + aK) / math.sqrt(d_h)
    weights = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
    expected = torch.einsum("bhij,bhijd->bhid", weights, v[:, :, None] + aV)
    out = relative.attend(q, k, v, torch.arange(s), torch.arange(s), allowed, SELF)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_parameters_are_per_layer_and_shared_across_heads():
    relative = Relative(ModelConfig(d_model=16, n_heads=2, n_layers=3).geometry(32), clip=16)
    assert relative.key_vectors.shape == (3, 33, 8)
