import pytest
import torch

from pebench.encodings.base import PositionLimitError
from tests.helpers import build


def test_past_the_table_raises_the_clear_error():
    model = build("learned", max_positions=10)
    model(torch.ones(1, 10, dtype=torch.long))  # exactly fits
    with pytest.raises(PositionLimitError, match=r"'Learned' represents at most 10 positions, but a sequence of 11 tokens"):
        model(torch.ones(1, 11, dtype=torch.long))


def test_table_defaults_to_the_longest_length():
    model = build("learned", max_length=37)
    assert model.encoding.max_positions == 37
    assert model.encoding.tables["decoder"].shape == (37, 32)


def test_encoder_decoder_has_one_table_per_stack():
    model = build("learned", architecture="encoder_decoder", max_length=12)
    assert set(model.encoding.tables) == {"encoder", "decoder"}
