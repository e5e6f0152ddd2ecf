"""No positional encoding (NoPE).

Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
Transformers": a causal decoder without any positional signal can still infer position from the
causal mask. Every hook is the base class's no-op; this is the baseline for throughput ratios.
"""

from __future__ import annotations

from pebench.encodings.base import Geometry, PositionalEncoding


class NoPE(PositionalEncoding):
    """No positional information at all."""

    description = "No positional encoding; order comes only from the causal mask"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    per_example_positions = True

    def __init__(self, geometry: Geometry):
        super().__init__(geometry)
