import math

import pytest

from pebench.encodings.rope import RoPE, scaled_frequencies
from pebench.model.transformer import ModelConfig

# Stated configuration: d_h = 8, base 10000 (theta = 1, 0.1, 0.01, 0.001), s = 4, L = 16.
THETA = [1.0, 0.1, 0.01, 0.001]


def test_position_interpolation_divides_every_frequency():
    theta, multiplier = scaled_frequencies("pi", 8, 10000.0, 4.0, 16)
    assert theta.tolist() == pytest.approx([0.25, 0.025, 0.0025, 0.00025]) and multiplier == 1.0


def test_ntk_scales_the_base():
    # base' = 10000 * 4^(8/6) = 63496.04; theta'_i = base'^(-i/4).
    theta, _ = scaled_frequencies("ntk", 8, 10000.0, 4.0, 16)
    assert theta.tolist() == pytest.approx([1.0, 0.0629960, 0.00396850, 0.00025], rel=1e-4)
    assert theta[-1].item() == pytest.approx(THETA[-1] / 4, rel=1e-5)  # the lowest frequency is interpolated by s


def test_yarn_ramp_and_temperature():
    # lambda_0 = 2 pi, r_0 = 16 / (2 pi) = 2.5465, gamma = (2.5465 - 1) / 31 = 0.049887:
    # theta'_0 = (1 - gamma) / 4 + gamma = 0.287415; the others have r < 1: theta / 4.
    theta, multiplier = scaled_frequencies("yarn", 8, 10000.0, 4.0, 16)
    assert theta.tolist() == pytest.approx([0.287415, 0.025, 0.0025, 0.00025], rel=1e-4)
    assert multiplier == pytest.approx(0.1 * math.log(4) + 1)  # 1.138629


def test_scaling_is_planned_per_bucket_and_undone_for_training():
    geometry = ModelConfig(d_model=16, n_heads=2).geometry(64, train_length=16)
    rope = RoPE(geometry, scaling="pi").eval()
    assert rope.plan(16) == {"rope_scaling": "none", "factor": 1.0}
    assert rope.inv_freq.tolist() == pytest.approx(THETA)
    assert rope.plan(64) == {"rope_scaling": "pi", "factor": 4.0}
    assert rope.inv_freq.tolist() == pytest.approx([t / 4 for t in THETA])
    rope.train()
    assert rope.inv_freq.tolist() == pytest.approx(THETA)
    assert RoPE(geometry).plan(64) == {}


def test_unknown_scaling_is_refused():
    with pytest.raises(ValueError, match="scaling must be one of"):
        RoPE(ModelConfig(d_model=16, n_heads=2).geometry(8), scaling="linear")
