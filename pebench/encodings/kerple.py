"""KERPLE, logarithmic variant.

Chi, Fan, Ramadge and Rudnicky 2022, "KERPLE: Kernelized Relative Positional Embedding for
Length Extrapolation" (arXiv:2205.09921), eq. 6 / sec. 4.2: the logit of query i and key j gets
    -r_1 * log(1 + r_2 * |i - j|),   r_1, r_2 > 0,
learned per head and per layer (kept positive as softplus of free parameters).
Self-attention only; cross-attention gets no bias.
Shapes: h heads, s sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pebench.encodings.alibi import distance_matrix
from pebench.encodings.base import Geometry, PositionalEncoding, Site, inverse_softplus, require_range


class KERPLE(PositionalEncoding):
    """Learned logarithmic distance penalty per head and layer.

    Args:
        geometry: the model served.
        init_r1, init_r2: initial values of r_1 and r_2 (the paper initialises both near 1).
    """

    description = "KERPLE-log: learned penalty -r1*log(1+r2*|i-j|) per head"
    reference = "Chi et al. 2022, arXiv:2205.09921"
    per_example_positions = True

    def __init__(self, geometry: Geometry, init_r1: float = 1.0, init_r2: float = 1.0):
        super().__init__(geometry)
        require_range("KERPLE", "init_r1", init_r1, above=0)
        require_range("KERPLE", "init_r2", init_r2, above=0)
        self.index = geometry.self_attention_index
        shape = (len(self.index), geometry.n_heads)
        self.raw_r1 = nn.Parameter(torch.full(shape, inverse_softplus(init_r1)))
        self.raw_r2 = nn.Parameter(torch.full(shape, inverse_softplus(init_r2)))

    def bias(self, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor | None:
        if site.kind == "cross":
            return None
        layer = self.index[site]
        r1 = nn.functional.softplus(self.raw_r1[layer])[:, None, None]  # [h, 1, 1]
        r2 = nn.functional.softplus(self.raw_r2[layer])[:, None, None]
        return -r1 * torch.log1p(r2 * distance_matrix(q_pos, k_pos))  # [(b,) h, s_q, s_k]
