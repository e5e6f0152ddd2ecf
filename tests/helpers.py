"""Small seeded models for the encoding and model tests."""

from __future__ import annotations

import torch

from pebench.model import ModelConfig, Transformer
from pebench.registry import ENCODINGS, plugins

BUILT_IN_ENCODINGS = ["nope", "sinusoidal", "learned", "relative", "rope", "flow", "alibi", "t5", "randomized", "xpos", "fire", "kerple"]


def build(encoding: str, architecture: str = "decoder", max_length: int = 64, vocab: int = 20, **params) -> Transformer:
    """A small seeded model with ``encoding`` (plugin name) and its params."""
    torch.manual_seed(0)
    config = ModelConfig(architecture=architecture, d_model=32, n_heads=4, n_layers=2, d_ff=64)
    return Transformer(config, vocab, plugins(ENCODINGS)[encoding](config.geometry(max_length), **params))
