"""xPos: RoPE with an exponential decay of the score with distance.

Sun et al. 2022, "A Length-Extrapolatable Transformer" (arXiv:2212.10554), eq. 7-8 and the
authors' torchscale code: pair i of q at position m is multiplied by zeta_i^(m / gamma) and of
k at position n by zeta_i^(-n / gamma), so that q_m . k_n carries zeta_i^((m - n) / gamma),
with zeta_i = (2i / d_h + 0.4) / 1.4 (in (0, 1)) and gamma = ``scale_base`` = 512.
xPos is defined for causal attention (sec. 3.2): bidirectional (encoder) self-attention applies
the rotation only, since keys after the query would be amplified. Pairing as in
:mod:`pebench.encodings.rope` (rotate half).
Length limit: the key at position n is multiplied by zeta_0^(-n / gamma) = 3.5^(n / gamma), which
leaves float32 (and bf16) near 2^128; xPos therefore states ``max_positions``, the last position
whose factors stay within 2^±:data:`FACTOR_BITS` (28,328 at gamma = 512), and refuses longer
sequences with :class:`PositionLimitError` rather than scoring inf, then NaN.
Shapes: b batch, h heads, s sequence, d_h head width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pebench.encodings.base import Geometry, Site, require_range
from pebench.encodings.rope import RoPE, rotate

FACTOR_BITS = 100  # the decay factors stay within 2^-100..2^100: far from float32's 2^128


def xpos_scale(d_head: int) -> Tensor:
    """zeta_i = (2i + 0.4 d_h) / (1.4 d_h) for i in 0..d_h/2-1: ``[d_h/2]``."""
    return (torch.arange(0, d_head, 2, dtype=torch.float32) + 0.4 * d_head) / (1.4 * d_head)


class XPos(RoPE):
    """Rotation plus exponential distance decay of q.k.

    Args:
        geometry: the model served.
        base: RoPE's frequency base.
        scale_base: gamma, positions per unit of the decay exponent (512 in the paper).
    Raises:
        ValueError: for a scale_base or base that is not positive.
        PositionLimitError: from the hooks, past ``max_positions`` (see the module docstring).
    """

    description = "xPos: rotary embedding with exponential decay of scores with distance"
    reference = "Sun et al. 2022, arXiv:2212.10554"

    def __init__(self, geometry: Geometry, base: float = 10000.0, scale_base: float = 512.0):
        super().__init__(geometry, base)
        require_range("xPos", "scale_base", scale_base, above=0)
        self.scale_base = scale_base
        self.register_buffer("zeta", xpos_scale(geometry.d_head), persistent=False)
        self.max_positions = int(scale_base * FACTOR_BITS * math.log(2) / -math.log(float(self.zeta[0])))

    def _decay(self, x: Tensor, pos: Tensor, sign: float) -> Tensor:
        power = self.zeta ** (sign * pos.float()[..., None, :, None] / self.scale_base)  # [(b,) 1, s, d_h/2]
        return x * torch.cat((power, power), dim=-1).to(x.dtype)

    def project_query(self, q: Tensor, pos: Tensor, site: Site) -> Tensor:
        if site.kind == "cross":
            return q
        q = rotate(q, pos, self.inv_freq)
        return q if site.stack == "encoder" else self._decay(q, pos, 1.0)

    def project_key_value(self, k: Tensor, v: Tensor, pos: Tensor, site: Site) -> tuple[Tensor, Tensor]:
        if site.kind == "cross":
            return k, v
        k = rotate(k, pos, self.inv_freq)
        return (k if site.stack == "encoder" else self._decay(k, pos, -1.0)), v
