"""The built-in encodings, small seeded models for the encoding and model tests, a spy on attention blocks, and the relative error
the tests bound."""

from __future__ import annotations

import pytest
import torch

from pebench.model.transformer import ModelConfig, Transformer
from pebench.core.registry import ENCODINGS, OWN_DISTRIBUTION, origin, plugins

# Randomized positions are drawn afresh at evaluation (as published); tests that compare two
# forward passes position by position give it fixed positions instead.
DETERMINISTIC = {"randomized": {"eval_positions": "arange"}}
# pebench's own encodings, those its distribution registers: a plugin package installed beside it
# is held to the conformance kit by its own tests.
BUILT_IN_ENCODINGS = [name for name in plugins(ENCODINGS) if origin(ENCODINGS, name)["distribution"] == OWN_DISTRIBUTION]
# Abacus and position coupling embed the task's structural positions (needs_structure): the tests
# whose models read random tokens, which have none, run the other built-ins.
BUILT_IN_ENCODINGS_WITHOUT_STRUCTURE = [name for name in BUILT_IN_ENCODINGS if not plugins(ENCODINGS)[name].needs_structure]


def build(encoding: str, architecture: str = "decoder", max_length: int = 64, vocab: int = 20, **params) -> Transformer:
    """A small seeded model with ``encoding`` (plugin name) and its params."""
    torch.manual_seed(0)
    config = ModelConfig(architecture=architecture, d_model=32, n_heads=4, n_layers=2, d_ff=64)
    return Transformer(config, vocab, plugins(ENCODINGS)[encoding](config.geometry(max_length), **params))


def spy_on_tiles(patch: pytest.MonkeyPatch, module) -> list[list[tuple[int, int]]]:
    """Records each call of ``module.attention_tiles``: the (query rows, keys) of every block."""
    plans, attention_tiles = [], module.attention_tiles

    def spy(q, k, causal, pair_values=None):
        blocks = attention_tiles(q, k, causal, pair_values)
        plans.append([(len(range(q.shape[2])[rows]), keys) for _, rows, keys in blocks])
        return blocks

    patch.setattr(module, "attention_tiles", spy)
    return plans


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """||value - reference|| / ||reference|| over all entries (0 when both are zero)."""
    return ((value - reference).norm() / reference.norm().clamp_min(1e-30)).item()
