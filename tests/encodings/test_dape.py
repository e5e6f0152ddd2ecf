"""DAPE (Zheng et al. 2024): its bias against values worked out by hand from eq. 4, the
paper's property that a zero MLP leaves the base bias, and the conformance kit."""

import math

import pytest
import torch

import pebench.testing
from pebench.encodings.base import Site
from pebench.encodings.dape import DAPE
from pebench.encodings.kerple import KERPLE
from pebench.model.transformer import ModelConfig

SELF = Site("decoder", 0, "self")
GEOMETRY = ModelConfig(d_model=4, n_heads=2, n_layers=1).geometry(16)  # d_h = 2


def qk(q_row, k_row, n=3):
    return torch.tensor(q_row).expand(1, 2, n, 2), torch.tensor(k_row).expand(1, 2, n, 2)


def test_a_zero_mlp_returns_the_base_bias():
    dape = DAPE(GEOMETRY)
    with torch.no_grad():
        for layer in dape.mlps.values():
            layer[2].weight.zero_()
            layer[2].bias.zero_()
    q, k = torch.randn(2, 1, 2, 5, 2).unbind(0)
    pos = torch.arange(5)
    assert torch.allclose(dape.logit_bias(q, k, pos, pos, SELF), KERPLE(GEOMETRY).bias(pos, pos, SELF).expand(1, 2, 5, 5))


def test_the_bias_by_hand():
    # f: the first layer reads head 0's logit A_0 (weight 1 on it, 0 elsewhere, no bias), a
    # LeakyReLU (slope 0.01 below 0), then head 0 gets 1x it and head 1 2x. q = (1, 0), k = (2, 0):
    # A = 2 / sqrt 2 = 1.414214 at every (i, j). KERPLE at r1 = r2 = 1: B = -log(1 + |i - j|).
    dape = DAPE(GEOMETRY, mlp_width=1)
    with torch.no_grad():
        first, _, second = dape.mlps["decoder_0_self"]
        first.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
        first.bias.zero_()
        second.weight.copy_(torch.tensor([[1.0], [2.0]]))
        second.bias.zero_()
    pos = torch.arange(3)
    bias = dape.logit_bias(*qk([1.0, 0.0], [2.0, 0.0]), pos, pos, SELF)[0]
    assert bias[0, 2, 0].item() == pytest.approx(-math.log(3) + 1.414214, abs=1e-5)
    assert bias[1, 1, 0].item() == pytest.approx(-math.log(2) + 2 * 1.414214, abs=1e-5)
    negative = dape.logit_bias(*qk([-1.0, 0.0], [2.0, 0.0]), pos, pos, SELF)[0]
    assert negative[1, 2, 2].item() == pytest.approx(2 * -0.01414214, abs=1e-6)  # B = 0 at distance 0; the leak below 0


def test_nope_as_the_base_is_the_mlp_of_the_logits_alone():
    dape = DAPE(GEOMETRY, base="nope")
    q, k = torch.randn(2, 1, 2, 4, 2).unbind(0)
    logits = q @ k.transpose(-1, -2) / math.sqrt(2)
    stacked = torch.cat([logits, torch.zeros_like(logits)], dim=1).permute(0, 2, 3, 1)
    expected = dape.mlps["decoder_0_self"](stacked).permute(0, 3, 1, 2)
    assert torch.allclose(dape.logit_bias(q, k, torch.arange(4), torch.arange(4), SELF), expected, atol=1e-6)


def test_the_causal_pass_is_the_full_bias_below_the_diagonal_and_zero_above():
    dape = DAPE(GEOMETRY)
    q, k = torch.randn(2, 3, 2, 6, 2).unbind(0)
    pos = torch.arange(6)
    full, causal = dape.logit_bias(q, k, pos, pos, SELF), dape.logit_bias(q, k, pos, pos, SELF, causal_from=0)
    below = torch.ones(6, 6, dtype=torch.bool).tril()
    base = KERPLE(GEOMETRY).bias(pos, pos, SELF).expand(3, 2, 6, 6)
    assert torch.allclose(causal[..., below], full[..., below], atol=1e-6) and torch.equal(causal[..., ~below], base[..., ~below])


def test_a_base_with_other_hooks_than_a_bias_is_refused():
    with pytest.raises(ValueError, match="the base 'rope' \\(RoPE\\) also uses project_query, project_key_value: choose a bias-only base"):
        DAPE(GEOMETRY, base="rope")
    with pytest.raises(ValueError, match="DAPE needs mlp_width >= 1; got 0"):
        DAPE(GEOMETRY, mlp_width=0)


@pytest.mark.parametrize("check", pebench.testing.checks(DAPE), ids=str)
def test_dape_passes_the_conformance_kit(check):
    check()
