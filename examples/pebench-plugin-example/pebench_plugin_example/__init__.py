"""An example pebench plugin: a per-head linear distance penalty with learned slopes.

The attention logit of query i and key j gets -m_h * |i - j|, with one learned slope m_h >= 0
per head and layer (softplus of a free parameter), initialised to ALiBi's geometric slopes
2^(-8k/H) (Press et al. 2022, arXiv:2108.12409, sec. 3). It uses one hook, ``bias``.
Shapes: h heads, s sequence.
"""

import torch
from torch import Tensor, nn

from pebench import Geometry, PositionalEncoding, Site


class LearnedSlopes(PositionalEncoding):
    """Linear distance penalty with a learned slope per head and attention site."""

    description = "Example plugin: linear distance penalty with learned per-head slopes"
    reference = "after Press et al. 2022, arXiv:2108.12409"

    def __init__(self, geometry: Geometry):
        super().__init__(geometry)
        heads = geometry.n_heads
        slopes = torch.tensor([2.0 ** (-8.0 * (k + 1) / heads) for k in range(heads)])
        raw = torch.log(torch.expm1(slopes))  # inverse softplus
        self.index = {site: i for i, site in enumerate(geometry.sites)}
        self.raw_slopes = nn.Parameter(raw.repeat(len(geometry.sites), 1))  # [sites, h]

    def bias(self, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor:
        distance = (q_pos[:, None] - k_pos[None, :]).abs().float()  # [s_q, s_k]
        slopes = nn.functional.softplus(self.raw_slopes[self.index[site]])  # [h]
        return -slopes[:, None, None] * distance  # [h, s_q, s_k]
