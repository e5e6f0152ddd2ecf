import pytest
import torch

from pebench.encodings.base import Site
from pebench.encodings.rope import RoPE
from pebench.encodings.xpos import XPos, xpos_scale
from pebench.model.transformer import ModelConfig

SELF = Site("decoder", 0, "self")


def test_scale_factors():
    # zeta_i = (2i + 0.4 * 8) / (1.4 * 8) for d_h = 8: 3.2/11.2, 5.2/11.2, 7.2/11.2, 9.2/11.2.
    assert xpos_scale(8).tolist() == pytest.approx([0.2857143, 0.4642857, 0.6428571, 0.8214286])


def test_score_is_rope_score_decayed_by_distance():
    geometry = ModelConfig(d_model=16, n_heads=2).geometry(64)
    xpos, rope = XPos(geometry, scale_base=512.0), RoPE(geometry)
    q, k = torch.zeros(1, 1, 1, 8), torch.zeros(1, 1, 1, 8)
    q[..., 0], k[..., 0] = 1.0, 1.0  # only pair 0 (zeta_0 = 2/7)
    m, n = torch.tensor([40]), torch.tensor([8])
    score = (xpos.project_query(q, m, SELF) * xpos.project_key_value(k, k, n, SELF)[0]).sum()
    plain = (rope.project_query(q, m, SELF) * rope.project_key_value(k, k, n, SELF)[0]).sum()
    assert score.item() == pytest.approx(plain.item() * (2 / 7) ** (32 / 512), rel=1e-5)


def test_encoder_gets_the_rotation_only():
    geometry = ModelConfig(d_model=16, n_heads=2, architecture="encoder_decoder").geometry(64)
    q = torch.randn(1, 2, 5, 8)
    encoder = Site("encoder", 0, "self")
    torch.testing.assert_close(XPos(geometry).project_query(q, torch.arange(5), encoder), RoPE(geometry).project_query(q, torch.arange(5), encoder))
