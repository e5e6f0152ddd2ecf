import math

import pytest
import torch
from torch import nn

from pebench.encodings.base import Site
from pebench.encodings.fire import FIRE
from pebench.encodings.kerple import KERPLE
from pebench.model.transformer import ModelConfig

SELF = Site("decoder", 0, "self")
GEOMETRY = ModelConfig(d_model=8, n_heads=2).geometry(16)


def test_fire_known_values_with_an_identity_mlp():
    fire = FIRE(GEOMETRY, hidden=2, init_c=1.0, init_threshold=1.0)
    layer = fire.layers[0]
    with torch.no_grad():  # f(x) = relu(x) for both heads
        layer.mlp[0].weight.copy_(torch.tensor([[1.0], [0.0]]))
        layer.mlp[0].bias.zero_()
        layer.mlp[2].weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
        layer.mlp[2].bias.zero_()
    bias = fire.bias(torch.arange(5), torch.arange(5), SELF)
    # b(3, 1) = ln(2 + 1) / ln(3 + 1) = 0.792481; b(4, 0) = ln 5 / ln 5 = 1; b(i, i) = 0.
    assert bias[0, 3, 1].item() == pytest.approx(math.log(3) / math.log(4), rel=1e-5)
    assert bias[1, 4, 0].item() == pytest.approx(1.0, rel=1e-5)
    assert bias[0].diagonal().abs().max().item() == 0.0


def test_fire_normalised_inputs_stay_in_unit_interval_at_any_length():
    fire = FIRE(GEOMETRY)
    captured = []
    fire.layers[0].mlp[0].register_forward_hook(lambda module, inputs, output: captured.append(inputs[0]))
    pos = torch.arange(300)
    fire.bias(pos, pos, SELF)
    causal = torch.ones(300, 300, dtype=torch.bool).tril()
    ratios = captured[0][..., 0][causal]
    assert ratios.min() >= 0 and ratios.max() <= 1 + 1e-6


def test_kerple_log_known_values():
    kerple = KERPLE(GEOMETRY, init_r1=1.0, init_r2=1.0)
    bias = kerple.bias(torch.arange(4), torch.arange(4), SELF)
    # -ln(1 + |i - j|): 0, -ln 2 = -0.693147, -ln 3 = -1.098612, -ln 4 = -1.386294.
    assert bias[0, 3].tolist() == pytest.approx([-1.386294, -1.098612, -0.693147, 0.0], rel=1e-5)
    assert kerple.bias(torch.arange(4), torch.arange(4), Site("decoder", 0, "cross")) is None
    assert isinstance(kerple.raw_r1, nn.Parameter) and kerple.raw_r1.shape == (2, 2)  # layers x heads
