import math

import pytest

from pebench.core.values import broken_bounds, check_even, check_range, check_type


def test_a_value_of_another_type_is_refused_by_name():
    check_type("training.target", None, float | None)
    with pytest.raises(ValueError, match=r"training.steps must be of type int; got True"):
        check_type("training.steps", True, int)


def test_broken_bounds_lists_every_bound_given_and_nothing_when_met():
    assert broken_bounds(0.5, at_least=0, below=1) == ""
    assert broken_bounds(1, at_least=0, below=1) == ">= 0 and < 1"
    assert broken_bounds(0, above=0) == "> 0"
    assert broken_bounds(math.nan, above=0) == "> 0"  # a NaN meets no bound
    assert broken_bounds(-5) == ""


def test_range_and_parity_checks_name_the_setting():
    check_range("training.steps", 1, at_least=1, kind="an integer")
    with pytest.raises(ValueError, match=r"^training.steps must be an integer >= 1; got 0$"):
        check_range("training.steps", 0, at_least=1, kind="an integer")
    check_even("d_model", 32, "the sinusoidal encoding pairs features two by two")
    with pytest.raises(ValueError, match=r"^the sinusoidal encoding pairs features two by two, so d_model must be even; got 33$"):
        check_even("d_model", 33, "the sinusoidal encoding pairs features two by two")
