import math

import pytest
import torch

from pebench.encodings.sinusoidal import Sinusoidal, sinusoidal_table
from pebench.model.transformer import ModelConfig


def test_known_values():
    # By hand from Vaswani et al. sec. 3.5 with d = 4: frequencies 1 and 10000^(-1/2) = 0.01.
    table = sinusoidal_table(torch.tensor([0, 1, 2]), 4)
    expected = torch.tensor([
        [0.0, 1.0, 0.0, 1.0],
        [0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653],  # sin 1, cos 1, sin .01, cos .01
        [0.9092974268256817, -0.4161468365471424, 0.01999866669333308, 0.9998000066665778],  # sin 2, cos 2, sin .02, cos .02
    ])
    torch.testing.assert_close(table, expected, rtol=0, atol=1e-6)


def test_large_position_and_dimension():
    # PE(100, 2i) with d = 8, i = 3: sin(100 / 10000^(6/8)) = sin(0.1) (10000^0.75 = 1000).
    table = sinusoidal_table(torch.tensor([100]), 8)
    assert table[0, 6].item() == pytest.approx(math.sin(0.1), abs=1e-6)
    assert table[0, 7].item() == pytest.approx(math.cos(0.1), abs=1e-6)


def test_odd_model_width_is_refused_clearly():
    geometry = ModelConfig(d_model=33, n_heads=3).geometry(16)
    with pytest.raises(ValueError, match="d_model must be even; got 33"):
        Sinusoidal(geometry)


def test_embed_adds_the_table():
    geometry = ModelConfig(d_model=4, n_heads=1).geometry(16)
    x = torch.zeros(2, 3, 4)
    out = Sinusoidal(geometry).embed(x, torch.arange(3), "decoder")
    torch.testing.assert_close(out[1], sinusoidal_table(torch.arange(3), 4))
