import json

from pebench.model.architecture import Architecture
from pebench.model.transformer import ModelConfig


def test_an_architecture_equals_prints_and_serialises_as_the_cards_string():
    for member, value in ((Architecture.DECODER, "decoder"), (Architecture.ENCODER_DECODER, "encoder_decoder"), (Architecture.ENCODER, "encoder")):
        assert member == value and hash(member) == hash(value) and Architecture(value) is member
        assert str(member) == value and f"{member}" == value and f"[{member:>8}]" == f"[{value:>8}]"
        assert json.dumps({"architecture": member}) == json.dumps({"architecture": value})


def test_a_model_config_holds_the_member_of_the_cards_string():
    config = ModelConfig(architecture="encoder")
    assert config.architecture is Architecture.ENCODER
