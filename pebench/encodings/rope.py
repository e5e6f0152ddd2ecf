"""Rotary position embedding (RoPE).

Su et al. 2021, "RoFormer", eq. 34 (f(x, m) = R^d_{Theta,m} x) with theta_i = base^(-2i/d_h)
(eq. 15), base 10000: each pair of query/key features is rotated by the angle m * theta_i, so the
score q_m . k_n depends only on the offset m - n (eq. 16).
Pairing convention: "rotate half" (GPT-NeoX, HF LLaMA): feature i pairs with feature i + d_h/2,
not the paper's adjacent (2i, 2i+1) pairs; the two are the same map up to a fixed permutation of
the q/k projection outputs. Applied in self-attention only; cross-attention is left position-free
because query and key positions index different sequences.
Shapes: b batch, h heads, s sequence, d_h head width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import Geometry, PositionalEncoding, Site, inverse_frequencies, require_even


def rotate(x: Tensor, pos: Tensor, inv_freq: Tensor) -> Tensor:
    """Rotate pairs (x_i, x_{i+d_h/2}) by pos * theta_i. x: ``[b, h, s, d_h]``, pos: ``[s]``,
    inv_freq: ``[d_h/2]``. Returns ``[b, h, s, d_h]``."""
    angles = pos.float()[:, None] * inv_freq  # [s, d_h/2]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x.chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


class RoPE(PositionalEncoding):
    """Rotary embedding of q and k in every self-attention layer; unbounded in length.

    Args:
        geometry: the model served.
        base: the frequency base (10000 in the paper).
    Raises:
        ValueError: if the head width d_h is odd.
    """

    description = "Rotary embedding of queries and keys in every self-attention layer"
    reference = "Su et al. 2021, arXiv:2104.09864"

    def __init__(self, geometry: Geometry, base: float = 10000.0):
        super().__init__(geometry)
        require_even(geometry.d_head, "the head width", "RoPE")
        self.register_buffer("inv_freq", inverse_frequencies(geometry.d_head, base), persistent=False)

    def project_query(self, q: Tensor, pos: Tensor, site: Site) -> Tensor:
        return q if site.kind == "cross" else rotate(q, pos, self.inv_freq)

    def project_key_value(self, k: Tensor, v: Tensor, pos: Tensor, site: Site) -> tuple[Tensor, Tensor]:
        return (k, v) if site.kind == "cross" else (rotate(k, pos, self.inv_freq), v)
