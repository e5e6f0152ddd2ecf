import math

import pytest
import torch

from pebench.encodings.rope import RoPE, rotate
from pebench.encodings.base import Site
from pebench.model.transformer import ModelConfig

SELF = Site("decoder", 0, "self")


def test_rotation_matches_complex_multiplication():
    # Independent reference: rotate-half pairs (x_i, x_{i+d/2}) as the complex number
    # x_i + 1j*x_{i+d/2}, multiplied by exp(1j * m * 10000^(-2i/d)).
    d, m = 8, 5
    x = torch.randn(1, 1, 1, d, dtype=torch.float64)
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :])
    theta = torch.tensor([10000 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    rotated = z * torch.exp(1j * m * theta)
    expected = torch.cat((rotated.real, rotated.imag), dim=-1)
    inv_freq = torch.tensor([10000 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float32)
    out = rotate(x.float(), torch.tensor([m]), inv_freq)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)


def test_known_value_position_one():
    # d = 2: a single pair rotated by angle m * 1. (1, 0) at m = 1 -> (cos 1, sin 1).
    out = rotate(torch.tensor([[[[1.0, 0.0]]]]), torch.tensor([1]), torch.tensor([1.0]))
    assert out.flatten().tolist() == pytest.approx([math.cos(1), math.sin(1)], abs=1e-6)


def test_scores_depend_only_on_offset():
    # Su et al. eq. 16: <R_m q, R_n k> = <q, R_{n-m} k>.
    rope = RoPE(ModelConfig(d_model=32, n_heads=2).geometry(64))
    q, k = torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16)
    scores = []
    for m, n in [(3, 1), (10, 8), (40, 38)]:
        rq, (rk, _) = rope.project_query(q, torch.tensor([m]), SELF), rope.project_key_value(k, k, torch.tensor([n]), SELF)
        scores.append((rq * rk).sum(-1))
    torch.testing.assert_close(scores[0], scores[1], atol=1e-5, rtol=0)
    torch.testing.assert_close(scores[0], scores[2], atol=1e-5, rtol=0)


def test_rotation_preserves_norms():
    rope = RoPE(ModelConfig(d_model=32, n_heads=2).geometry(64))
    q = torch.randn(2, 2, 50, 16)
    rq = rope.project_query(q, torch.arange(50), SELF)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))


def test_cross_attention_is_left_alone():
    rope = RoPE(ModelConfig(d_model=32, n_heads=2, architecture="encoder_decoder").geometry(64))
    q = torch.randn(1, 2, 4, 16)
    cross = Site("decoder", 0, "cross")
    assert rope.project_query(q, torch.arange(4), cross) is q
    assert all(t is q for t in rope.project_key_value(q, q, torch.arange(4), cross))


def test_odd_head_width_is_refused():
    with pytest.raises(ValueError, match="head width must be even; got 3"):
        RoPE(ModelConfig(d_model=6, n_heads=2).geometry(8))
