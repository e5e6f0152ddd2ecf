"""ALiBi: attention with linear biases.

Press, Smith and Lewis 2022, "Train Short, Test Long" (arXiv:2108.12409), sec. 3: the logit of
query i and key j gets -m_h * (i - j), with one fixed slope m_h per head. For n heads, a power
of two, the slopes are the geometric sequence starting at 2^(-8/n) with that ratio; otherwise
the slopes of the closest smaller power of two, followed by every other slope of twice that
count (the authors' reference implementation, ``get_slopes``).
Causal self-attention uses -m_h (i - j) for j <= i. Bidirectional self-attention (an encoder)
uses the stated symmetric variant -m_h |i - j|. Cross-attention gets no bias: its query and key
positions index different sequences.
Shapes: h heads, s sequence.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pebench.encodings.base import Geometry, PositionalEncoding, Site


def alibi_slopes(n_heads: int) -> list[float]:
    """The head slopes m_1..m_n of Press et al. 2022 (reference implementation)."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: n_heads - closest]


def distance_matrix(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """|i - j| for every (query, key): ``[s_q, s_k]`` float, or ``[b, 1, s_q, s_k]`` for positions
    ``[b, s]`` (per example; the 1 broadcasts over the heads)."""
    distance = (q_pos[..., :, None] - k_pos[..., None, :]).abs().float()
    return distance if distance.dim() == 2 else distance[:, None]


class ALiBi(PositionalEncoding):
    """Fixed linear distance penalties per head; unbounded in length, no parameters.

    Args:
        geometry: the model served.
    """

    description = "Fixed per-head linear distance penalties on attention logits"
    reference = "Press et al. 2022, arXiv:2108.12409"
    per_example_positions = True

    def __init__(self, geometry: Geometry):
        super().__init__(geometry)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(geometry.n_heads)), persistent=False)

    def bias(self, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor | None:
        if site.kind == "cross":
            return None
        # Causal rows only see j <= i, where |i - j| = i - j: one formula serves both variants.
        return -self.slopes[:, None, None] * distance_matrix(q_pos, k_pos)  # [(b,) h, s_q, s_k]
