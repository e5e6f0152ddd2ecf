"""Rotary position embedding (RoPE), with position interpolation, NTK-aware and YaRN scaling.

Su et al. 2021, "RoFormer", eq. 34 (f(x, m) = R^d_{Theta,m} x) with theta_i = base^(-2i/d_h)
(eq. 15), base 10000: each pair of query/key features is rotated by the angle m * theta_i, so the
score q_m . k_n depends only on the offset m - n (eq. 16).
Pairing convention: "rotate half" (GPT-NeoX, HF LLaMA): feature i pairs with feature i + d_h/2,
not the paper's adjacent (2i, 2i+1) pairs; the two are the same map up to a fixed permutation of
the q/k projection outputs. Applied in self-attention only; cross-attention is left position-free
because query and key positions index different sequences.

Scaling beyond the training length L (``scaling`` card parameter), switched on in evaluation
for a bucket whose longest sequence exceeds L, with factor s (``factor``, default: that
sequence's length / L):
- ``"pi"``, position interpolation (Chen et al. 2023, arXiv:2306.15595, eq. 4): theta_i / s.
- ``"ntk"``, NTK-aware scaling (Peng et al. 2023, arXiv:2309.00071, sec. 3.2, eq. 16):
  base' = base * s^(d_h / (d_h - 2)).
- ``"yarn"`` (Peng et al. 2023, sec. 3.4, eq. 18-20 and 22): with wavelength
  lambda_i = 2 pi / theta_i and r_i = L / lambda_i, ramp gamma(r) = 0 below alpha, 1 above beta,
  linear between (alpha = 1, beta = 32): theta'_i = (1 - gamma(r_i)) theta_i / s + gamma(r_i) theta_i,
  and q, k each multiplied by 0.1 ln s + 1 (the attention temperature sqrt(1/t)).
Where pebench differs: every scaling is applied at evaluation only, to a model trained at the
training length, without the fine-tuning at the longer length that Chen et al. and Peng et al.
(YaRN) pair it with; the cards say so, and their scores measure scaling without fine-tuning.
Shapes: b batch, h heads, s sequence, d_h head width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pebench.encodings.base import Geometry, PositionalEncoding, Site, inverse_frequencies, require_even, require_range

SCALINGS = ("none", "pi", "ntk", "yarn")


def rotate(x: Tensor, pos: Tensor, inv_freq: Tensor) -> Tensor:
    """Rotate pairs (x_i, x_{i+d_h/2}) by pos * theta_i. x: ``[b, h, s, d_h]``, pos: ``[s]`` or
    ``[b, s]``, inv_freq: ``[d_h/2]``. Returns ``[b, h, s, d_h]``.

    Written as [x_2, x_1] * [-sin, sin] + x * [cos, cos] (x_1, x_2 the halves of x): [x_2, x_1]
    is x rolled by d_h/2, whose gradient is one roll back (the halves' slices would each
    materialise a zero-filled gradient of x's size), and the products accumulate in place into
    that one new tensor: three passes over x, one allocation (``docs/throughput.md`` has the
    timings)."""
    angles = pos.float()[..., None, :, None] * inv_freq  # [(b,) 1, s, d_h/2]: broadcast over the heads
    cos, sin = angles.cos(), angles.sin()
    cos, sin = torch.cat((cos, cos), dim=-1).to(x.dtype), torch.cat((-sin, sin), dim=-1).to(x.dtype)  # [(b,) 1, s, d_h]
    return x.roll(x.shape[-1] // 2, dims=-1).mul_(sin).addcmul_(x, cos)


def scaled_frequencies(
    method: str, d_head: int, base: float, factor: float, training_length: int, alpha: float = 1.0, beta: float = 32.0
) -> tuple[Tensor, float]:
    """(theta'_i ``[d_h/2]``, q/k multiplier) of a RoPE scaling ``method`` at factor s, for a
    model trained on sequences up to ``training_length`` tokens (L)."""
    theta = inverse_frequencies(d_head, base)
    if method == "none" or factor <= 1:
        return theta, 1.0
    if method == "pi":
        return theta / factor, 1.0
    if method == "ntk":
        return inverse_frequencies(d_head, base * factor ** (d_head / (d_head - 2))), 1.0
    ratio = training_length / (2 * math.pi / theta)  # r_i = L / lambda_i
    ramp = ((ratio - alpha) / (beta - alpha)).clamp(0, 1)  # gamma(r_i)
    return (1 - ramp) * theta / factor + ramp * theta, 0.1 * math.log(factor) + 1


class RoPE(PositionalEncoding):
    """Rotary embedding of q and k in every self-attention layer; unbounded in length.

    Args:
        geometry: the model served.
        base: the frequency base (10000 in the paper).
        scaling: ``"none"``, ``"pi"``, ``"ntk"`` or ``"yarn"`` (applied in evaluation past the
            training length).
        factor: the scale factor s; default: the bucket's longest sequence / training length.
        yarn_alpha, yarn_beta: YaRN's ramp bounds.
    Raises:
        ValueError: if the head width d_h is odd or the scaling unknown.
    """

    description = "Rotary embedding of queries and keys in every self-attention layer"
    reference = "Su et al. 2021, arXiv:2104.09864"
    per_example_positions = True

    def __init__(
        self, geometry: Geometry, base: float = 10000.0, scaling: str = "none", factor: float | None = None, yarn_alpha: float = 1.0, yarn_beta: float = 32.0
    ):
        super().__init__(geometry)
        require_even(geometry.d_head, "the head width", "RoPE")
        if scaling not in SCALINGS:
            raise ValueError(f"RoPE scaling must be one of {SCALINGS}; got {scaling!r}")
        require_range("RoPE", "base", base, above=0)
        if factor is not None:
            require_range("RoPE", "factor", factor, above=0)
        require_range("RoPE", "yarn_alpha", yarn_alpha, at_least=0)
        require_range("RoPE", "yarn_beta", yarn_beta, above=yarn_alpha)
        self.base, self.scaling, self.factor, self.yarn = base, scaling, factor, (yarn_alpha, yarn_beta)
        self.register_buffer("inv_freq", inverse_frequencies(geometry.d_head, base), persistent=False)
        self.multiplier = 1.0

    def plan(self, length: int) -> dict:
        training_length = self.geometry.training_length
        factor = 1.0
        if self.scaling != "none" and length > training_length:
            factor = self.factor or length / training_length
        inv_freq, self.multiplier = scaled_frequencies(self.scaling, self.geometry.d_head, self.base, factor, training_length, *self.yarn)
        self.inv_freq = inv_freq.to(self.inv_freq.device)
        if self.scaling == "none":
            return {}
        return {"rope_scaling": self.scaling if factor > 1 else "none", "factor": round(factor, 4)}

    def train(self, mode: bool = True):
        if mode:
            self.plan(0)  # training always uses the unscaled frequencies
        return super().train(mode)

    def project_query(self, q: Tensor, pos: Tensor, site: Site) -> Tensor:
        return q if site.kind == "cross" else self._scaled(rotate(q, pos, self.inv_freq))

    def project_key_value(self, k: Tensor, v: Tensor, pos: Tensor, site: Site) -> tuple[Tensor, Tensor]:
        return (k, v) if site.kind == "cross" else (self._scaled(rotate(k, pos, self.inv_freq)), v)

    def _scaled(self, x: Tensor) -> Tensor:
        """YaRN's attention temperature on q and k; no extra pass over them when it is 1."""
        return x if self.multiplier == 1.0 else x * self.multiplier
