import pytest

from pebench.config.cards import encoding_card, task_card
from pebench.config.overrides import apply_overrides, changed_settings, parse_value
from pebench.config.protocol import SECTION_KEYS


def test_overrides_set_task_and_encoding_values():
    task, encoding = task_card("copy"), encoding_card("flow")
    apply_overrides(task, encoding, ["training.steps=7", "encoding.delta=0.05", "split.train=[1, 4]"], SECTION_KEYS)
    assert task["training"]["steps"] == 7 and encoding["params"]["delta"] == 0.05 and task["split"]["train"] == [1, 4]


def test_unknown_override_lists_known_keys():
    with pytest.raises(ValueError, match="has no key 'training.stepz'; known keys: .*training.steps"):
        apply_overrides(task_card("copy"), encoding_card("rope"), ["training.stepz=3"], SECTION_KEYS)
    with pytest.raises(ValueError, match="SECTION.KEY=VALUE"):
        apply_overrides(task_card("copy"), encoding_card("rope"), ["steps"], SECTION_KEYS)


def test_values_are_toml_literals_else_numbers_else_text():
    assert parse_value("3") == 3 and parse_value("0.1") == 0.1 and parse_value("true") is True and parse_value("[1, 8]") == [1, 8]
    assert parse_value("07") == 7  # TOML refuses the leading zero; Python's int reads it
    assert parse_value("rope") == "rope" and parse_value('"rope"') == "rope"


def test_changed_settings_do_not_depend_on_how_overrides_are_spelled():
    card_task, card_encoding = task_card("copy"), encoding_card("rope")
    spellings = (["training.steps=07"], ["training.steps=3", "training.steps=7"])
    changed = []
    for overrides in spellings:
        task, encoding = task_card("copy"), encoding_card("rope")
        apply_overrides(task, encoding, overrides, SECTION_KEYS)
        changed.append(changed_settings(task, encoding, card_task, card_encoding))
    assert changed == [{"training.steps": 7}] * 2
    assert changed_settings(card_task, card_encoding, card_task, card_encoding) == {}
