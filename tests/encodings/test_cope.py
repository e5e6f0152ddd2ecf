"""CoPE (Golovneva et al. 2024): its contextual positions and logit term against values worked
out by hand from eqs. 3-5, and the paper's property that gates of 1 count tokens."""

import math

import pytest
import torch

import pebench.testing
from pebench.encodings.base import Site
from pebench.encodings.cope import CoPE, contextual_positions, interpolated_logits
from pebench.model.transformer import ModelConfig

DECODER = Site("decoder", 0, "self")
ENCODER = Site("encoder", 0, "self")
GEOMETRY = ModelConfig(d_model=4, n_heads=2, n_layers=1).geometry(16, 8)  # d_h = 2
ENCODER_GEOMETRY = ModelConfig(architecture="encoder", d_model=4, n_heads=2, n_layers=1).geometry(16, 8)


def test_causal_positions_sum_the_gates_from_the_key_to_the_query():
    # Row 2 of three tokens with gates 0.2, 0.5, 0.9: p_20 = 1.6, p_21 = 1.4, p_22 = 0.9; the
    # future keys of rows 0 and 1 have gate 0 (masked) and count for nothing.
    gates = torch.tensor([[0.7, 0.0, 0.0], [0.4, 0.6, 0.0], [0.2, 0.5, 0.9]])
    positions = contextual_positions(gates[None, None], causal=True)[0, 0]
    assert torch.allclose(positions, torch.tensor([[0.7, 0.0, 0.0], [1.0, 0.6, 0.0], [1.6, 1.4, 0.9]]))


def test_an_encoder_counts_the_gates_between_the_two_tokens_either_way():
    # Row 0: p_00 = g_00 = 0.9, p_01 = 0.9 + 0.5 = 1.4, p_02 = 0.9 + 0.5 + 0.2 = 1.6;
    # row 1: p_10 = 0.3 + 0.8 = 1.1, p_11 = 0.8, p_12 = 0.8 + 0.1 = 0.9.
    gates = torch.tensor([[0.9, 0.5, 0.2], [0.3, 0.8, 0.1], [0.4, 0.4, 0.4]])
    positions = contextual_positions(gates[None, None], causal=False)[0, 0]
    assert torch.allclose(positions, torch.tensor([[0.9, 1.4, 1.6], [1.1, 0.8, 0.9], [1.2, 0.8, 0.4]]))


def test_gates_of_one_count_tokens_the_relative_position_plus_one():
    n = 6
    causal = torch.ones(n, n).tril()
    positions = contextual_positions(causal[None, None], causal=True)[0, 0]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    assert torch.equal(positions[causal.bool()], (i - j + 1).float().expand(n, n)[causal.bool()])
    both_ways = contextual_positions(torch.ones(1, 1, n, n), causal=False)[0, 0]
    assert torch.equal(both_ways, ((i - j).abs() + 1).float())


def test_interpolation_reads_between_the_integer_positions():
    # q.e[p] = 0, 10, 20, 30 at p = 0..3: p = 1.4 reads 14, p = 2 reads 20, p = 0.25 reads 2.5.
    logits = torch.tensor([0.0, 10.0, 20.0, 30.0]).expand(1, 1, 1, 4)
    assert interpolated_logits(logits, torch.tensor([[[[1.4, 2.0, 0.25]]]]))[0, 0, 0].tolist() == pytest.approx([14.0, 20.0, 2.5])


def test_the_gradient_in_the_position_is_the_slope_between_integers_and_none_at_one():
    # dz/dp = z[ceil p] - z[floor p]: 20 between 1 and 2 (z = 0, 10, 30); 0 at p = 1 exactly,
    # where ceil = floor (the authors' code), not the slope on either side.
    logits = torch.tensor([0.0, 10.0, 30.0]).expand(1, 1, 1, 3)
    positions = torch.tensor([[[[1.5, 1.0]]]], requires_grad=True)
    interpolated_logits(logits, positions).sum().backward()
    assert positions.grad[0, 0, 0].tolist() == [20.0, 0.0]


def test_the_logit_term_by_hand():
    # q = (1, 0) and k = (0, 1) in both heads: q.k = 0, every gate sigma(0) = 1/2, so causal
    # p_ij = (i - j + 1) / 2. With e[p] = (p, 0), q.e[p] = p and the interpolated term is p itself
    # (linear between integers); CoPE adds it divided by sqrt(d_h) = sqrt 2.
    cope = CoPE(GEOMETRY, npos_max=8)
    with torch.no_grad():
        cope.embeddings[0, 0] = torch.arange(8.0)
    q = torch.tensor([1.0, 0.0]).expand(1, 2, 3, 2)
    k = torch.tensor([0.0, 1.0]).expand(1, 2, 3, 2)
    allowed = torch.ones(3, 3, dtype=torch.bool).tril()
    term = cope.logit_term(q, k, allowed, DECODER)[0, 0]
    expected = torch.tensor([[0.5, 0.0, 0.0], [1.0, 0.5, 0.0], [1.5, 1.0, 0.5]]) / math.sqrt(2)
    assert torch.allclose(term[allowed], expected[allowed], atol=1e-6)
    # Counts past P - 1 are clamped: with P = 2, the count 1.5 reads e[1] = (1, 0).
    clamped = CoPE(GEOMETRY, npos_max=2)
    with torch.no_grad():
        clamped.embeddings[0, 0] = torch.arange(2.0)
    assert clamped.logit_term(q, k, allowed, DECODER)[0, 0, 2, 0].item() == pytest.approx(1 / math.sqrt(2))


def test_the_attention_is_the_softmax_of_the_logits_plus_the_term():
    torch.manual_seed(0)
    cope = CoPE(ENCODER_GEOMETRY, npos_max=8)
    with torch.no_grad():
        cope.embeddings.normal_()
    q, k, v = torch.randn(3, 1, 2, 4, 2).unbind(0)
    allowed = torch.ones(4, 4, dtype=torch.bool)
    out = cope.attend(q, k, v, torch.arange(4), torch.arange(4), allowed, ENCODER)
    gates = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(2))
    # the bidirectional count, by its definition: the sum of row i's gates from min(i, j) to max(i, j)
    positions = torch.stack([torch.stack([gates[0, :, i, min(i, j): max(i, j) + 1].sum(-1) for j in range(4)], -1) for i in range(4)], -2)
    z = interpolated_logits(q @ cope.embeddings[0], positions[None])
    weights = torch.softmax((q @ k.transpose(-1, -2) + z) / math.sqrt(2), dim=-1)
    assert torch.allclose(out, weights @ v, atol=1e-5)
    assert torch.equal(cope.attend(q, k, v, torch.arange(4), torch.arange(4), allowed, Site("decoder", 0, "cross")),
                       torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed))  # no term across sequences


def test_a_table_of_fewer_than_two_positions_is_refused():
    with pytest.raises(ValueError, match="CoPE needs npos_max >= 2; got 1"):
        CoPE(GEOMETRY, npos_max=1)
    assert CoPE(GEOMETRY).npos == 9  # the longest training sequence (8) + 1


@pytest.mark.parametrize("check", pebench.testing.checks(CoPE), ids=str)
def test_cope_passes_the_conformance_kit(check):
    check()
