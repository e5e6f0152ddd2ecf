"""Sinusoidal absolute positional encoding.

Vaswani et al. 2017, "Attention Is All You Need", sec. 3.5:
    PE(pos, 2i)   = sin(pos / base^(2i/d))
    PE(pos, 2i+1) = cos(pos / base^(2i/d)),   base = 10000,
added to the token embeddings of every stack (interleaved sin/cos, as in the paper).
Shapes: b batch, s sequence, d model width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pebench.encodings.base import Geometry, PositionalEncoding, inverse_frequencies, require_even, require_range


def sinusoidal_table(pos: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """PE(pos, :) for each position. pos: ``[s]`` or ``[b, s]`` (any numeric dtype). Returns
    ``[s, d]`` or ``[b, s, d]`` float32.

    Raises:
        ValueError: if ``d_model`` is odd (sin and cos come in pairs).
    """
    require_even(d_model, "d_model", "the sinusoidal encoding")
    angles = pos.float()[..., None] * inverse_frequencies(d_model, base).to(pos.device)  # [(b,) s, d/2]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # [(b,) s, d] interleaved


class Sinusoidal(PositionalEncoding):
    """Fixed sinusoids added to the input embeddings; unbounded in length.

    Args:
        geometry: the model served.
        base: the wavelength base (10000 in the paper).
    Raises:
        ValueError: if d_model is odd.
    """

    description = "Fixed sinusoids added to the token embeddings"
    reference = "Vaswani et al. 2017, arXiv:1706.03762, sec. 3.5"
    per_example_positions = True

    def __init__(self, geometry: Geometry, base: float = 10000.0):
        super().__init__(geometry)
        require_even(geometry.d_model, "d_model", "the sinusoidal encoding")
        require_range("the sinusoidal encoding", "base", base, above=0)
        self.base = base

    def embed(self, x: Tensor, pos: Tensor, stack: str) -> Tensor:
        return x + sinusoidal_table(pos, x.shape[-1], self.base).to(x.dtype)  # [b, s, d]
