"""The plugin conformance kit (pebench.testing): every built-in encoding passes it, and plugins
broken in the ways it names fail it, with the property in the message."""

import pytest
import torch

import pebench.testing
from pebench import PositionalEncoding
from pebench.config.cards import encoding_cards
from pebench.core.registry import ENCODINGS, plugins
from tests.helpers import BUILT_IN_ENCODINGS

BUILT_IN = [(name, check) for name in BUILT_IN_ENCODINGS for check in pebench.testing.checks(plugins(ENCODINGS)[name])]
# the randomized cards draw positions at evaluation: padding_invariance and batch_independence
# hold them to one draw per example, at each card's own base
RANDOMIZED_CARDS = [(name, check) for name, card in sorted(encoding_cards().items()) if card["plugin"] == "randomized"
                    for check in pebench.testing.checks(plugins(ENCODINGS)["randomized"], card["params"])]


@pytest.mark.parametrize("name, check", BUILT_IN, ids=[f"{name}-{check}" for name, check in BUILT_IN])
def test_every_built_in_encoding_passes_the_kit(name, check):
    check()


@pytest.mark.parametrize("name, check", RANDOMIZED_CARDS, ids=[f"{name}-{check}" for name, check in RANDOMIZED_CARDS])
def test_the_randomized_cards_pass_the_whole_kit(name, check):
    check()


def test_the_randomized_cards_are_held_to_padding_invariance():
    assert {"randomized", "randomized_sinusoidal"} <= {name for name, _ in RANDOMIZED_CARDS}
    assert all(any(c.name == "padding_invariance" for n, c in RANDOMIZED_CARDS if n == name) for name in ("randomized", "randomized_sinusoidal"))


class PeeksAhead(PositionalEncoding):
    """Broken on purpose: adds the next token's embedding to each token's (leaks the future)."""

    def embed(self, x, pos, stack):
        return x + x.roll(-1, dims=1)


class DependsOnTheBatch(PositionalEncoding):
    """Broken on purpose: a bias from the batch mean, so each example sees the others."""

    def embed(self, x, pos, stack):
        return x + x.mean(dim=0, keepdim=True)


class ForgetsItsLimit(PositionalEncoding):
    """Broken on purpose: states max_positions but serves any length."""

    def __init__(self, geometry):
        super().__init__(geometry)
        self.max_positions = 16

    def positions(self, length, device=None):
        return torch.arange(length, device=device)


@pytest.mark.parametrize("plugin, broken", [
    (PeeksAhead, "causality[decoder]: outputs at positions 0-6 after changing tokens 7-11 (the future leaks into the past)"),
    (DependsOnTheBatch, "batch_independence[decoder]: an example's outputs beside other examples of its length differ"),
    (ForgetsItsLimit, "max_positions[decoder]: positions(17) did not raise PositionLimitError (max_positions = 16)"),
])
def test_a_broken_plugin_fails_the_kit_naming_the_property(plugin, broken):
    with pytest.raises(AssertionError, match=broken.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        pebench.testing.check_encoding(plugin)


def test_the_kit_runs_each_check_in_each_architecture():
    names = [str(check) for check in pebench.testing.checks(PositionalEncoding)]
    assert "causality[decoder]" in names and "causality[encoder_decoder]" not in names
    assert {"cached_decoding[decoder]", "cached_decoding[encoder_decoder]", "padding_invariance[encoder_decoder]"} <= set(names)
