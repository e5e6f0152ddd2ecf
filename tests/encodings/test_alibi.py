import pytest
import torch

from pebench.encodings.alibi import ALiBi, alibi_slopes
from pebench.encodings.base import Site
from pebench.model.transformer import ModelConfig


def test_slopes_for_8_heads_are_the_papers_geometric_sequence():
    # Press et al. sec. 3: for 8 heads, 1/2, 1/4, ..., 1/256.
    assert alibi_slopes(8) == pytest.approx([2.0**-k for k in range(1, 9)])


def test_slopes_for_6_heads():
    # By hand from the reference get_slopes: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then
    # every other 8-head slope (2^-1, 2^-3, ...) until 6 slopes.
    assert alibi_slopes(6) == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])


def test_slopes_for_12_heads():
    # The 8-head slopes, then every other 16-head slope (start 2^-0.5): 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    expected = [2.0**-k for k in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    assert alibi_slopes(12) == pytest.approx(expected)


def test_bias_is_linear_in_distance_and_symmetric_in_the_encoder():
    alibi = ALiBi(ModelConfig(d_model=8, n_heads=2, architecture="encoder_decoder").geometry(16))
    pos = torch.arange(4)
    decoder = alibi.bias(pos, pos, Site("decoder", 0, "self"))
    assert decoder[0, 3].tolist() == pytest.approx([-0.1875, -0.125, -0.0625, 0.0])  # slope 2^(-8/2) = 1/16 for head 0 of 2
    encoder = alibi.bias(pos, pos, Site("encoder", 0, "self"))
    torch.testing.assert_close(encoder, encoder.transpose(1, 2))
    assert alibi.bias(pos, pos, Site("decoder", 0, "cross")) is None
