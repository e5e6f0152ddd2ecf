"""CoPE: contextual position encoding.

Golovneva, Wang, Weston and Sukhbaatar 2024, "Contextual Position Encoding: Learning to Count
What's Important" (arXiv:2405.18719), sec. 3, and the authors' code
(facebookresearch/RAM, ``projects/cope/src/cope/context_position.py``). In one attention head,
query i and key j have the gate g_ij = σ(q_i · k_j / sqrt(d_h)) (eq. 3; the code's scaling) and
the contextual position

    p_ij = Σ_{t=j..i} g_it                                          (eq. 4)

a fractional count of the tokens between them that the query "counts". Positions are clamped
to ``npos_max - 1``. A learned position embedding e[p] (d_h wide, one table per layer shared by
its heads, initialised to zeros: the code) gives the logit term q_i · e[p_ij], interpolated
between the integer positions around p_ij (eq. 5):

    z_ij = (p_ij - ⌊p_ij⌋) q_i·e[⌈p_ij⌉] + (1 - p_ij + ⌊p_ij⌋) q_i·e[⌊p_ij⌋]

and the attention logit is (q_i · k_j + z_ij) / sqrt(d_h) (the code divides both terms). With
every gate 1, p_ij = i - j + 1: relative positions, counted in tokens.

Where pebench goes beyond the paper, which defines CoPE for causal self-attention:
- an encoder's (bidirectional) self-attention counts the gates between the two tokens whichever
  comes first, p_ij = Σ_{t between i and j} g_it, as ALiBi's symmetric variant;
- cross-attention gets no CoPE term (its queries and keys index different sequences), as
  pebench's other relative encodings;
- ``npos_max`` defaults to the longest training sequence + 1, the code's block size + 1
  (position 0 cannot occur in causal attention, where p_ii = g_ii > 0, but is kept as the code
  keeps it): a count past it is clamped, not refused, so CoPE has no ``max_positions``.
Keys that a query may not attend (the future, padding) count for nothing (their gates are 0), so
cached decoding and padding give the positions of the full pass.
Shapes: b batch, h heads, s (q, k) sequence, d_h head width, P = ``npos_max`` positions.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from pebench.encodings.attention import scaled_dot_product, tiled_attention
from pebench.encodings.base import Geometry, PositionalEncoding, Site, require_range


def contextual_positions(gates: Tensor, causal: bool, first_row: int = 0) -> Tensor:
    """p_ij of eq. 4 from the gates ``[b, h, rows, s_k]`` (0 at the keys a query may not attend).

    Causal: the sum of the gates from key j to the query's last attended key (the reverse
    cumulative sum; the query's own key is its last). Bidirectional (row i is the query at key
    ``first_row + i``; a block of the rows of s_q = s_k tokens): the sum over the keys between
    the query's and j, both included.
    Returns ``[b, h, rows, s_k]``.
    """
    if causal:
        return gates.flip(-1).cumsum(-1).flip(-1)
    total = gates.cumsum(-1)  # c_ij = Σ_{t <= j} g_it
    own = total.diagonal(offset=first_row, dim1=-2, dim2=-1)[..., None]  # c_i at the query's key, [b, h, rows, 1]
    own_gate = gates.diagonal(offset=first_row, dim1=-2, dim2=-1)[..., None]  # its gate
    before = torch.ones(gates.shape[-2:], dtype=torch.bool, device=gates.device).tril(first_row)  # key j at or before the query's
    return torch.where(before, own - total + gates, total - own + own_gate)


def interpolated_logits(position_logits: Tensor, positions: Tensor) -> Tensor:
    """z_ij of eq. 5: ``position_logits`` ``[b, h, s_q, P]`` (q_i · e[p] at each integer p)
    read at the fractional ``positions`` ``[b, h, s_q, s_k]`` (within [0, P - 1]), linearly
    between the integers around each: z[⌊p⌋] + (p - ⌊p⌋)(z[⌈p⌉] - z[⌊p⌋]), which is eq. 5 (at
    an integer p, ⌈p⌉ = ⌊p⌋: no gradient in p there, as in the authors' code).
    Returns ``[b, h, s_q, s_k]``."""
    floor = positions.floor()
    weight = positions - floor  # the gradient flows through the weight, as in the paper
    low = position_logits.gather(-1, floor.long())
    high = position_logits.gather(-1, positions.ceil().long())
    return torch.addcmul(low, weight, high - low)


class CoPE(PositionalEncoding):
    """Contextual positions from gated counts, with a learned position table per layer.

    Args:
        geometry: the model served.
        npos_max: P, the number of position embeddings (counts 0..P-1; larger counts are
            clamped to P - 1); None: the longest training sequence + 1.
    Raises:
        ValueError: for ``npos_max`` < 2.
    """

    description = "CoPE: positions counted by gates sigmoid(q.k), interpolated learned position logits"
    reference = "Golovneva et al. 2024, arXiv:2405.18719"

    def __init__(self, geometry: Geometry, npos_max: int | None = None):
        super().__init__(geometry)
        self.npos = npos_max if npos_max is not None else geometry.training_length + 1
        require_range("CoPE", "npos_max", self.npos, at_least=2)
        self.index = geometry.self_attention_index
        self.embeddings = nn.Parameter(torch.zeros(len(self.index), geometry.d_head, self.npos))  # e[p] per layer: [d_h, P]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        if site.kind == "cross":
            return scaled_dot_product(q, k, v, allowed, None, causal)

        def logit_term(q_block: Tensor, k_block: Tensor, allowed_block: Tensor, tile: tuple) -> Tensor:
            return self.logit_term(q_block, k_block, allowed_block, site, first_row=tile[1].start or 0)

        return tiled_attention(q, k, v, allowed, logit_term, causal)

    def logit_term(self, q: Tensor, k: Tensor, allowed: Tensor, site: Site, first_row: int = 0) -> Tensor:
        """z_ij / sqrt(d_h), the term CoPE adds to the scaled attention logits. q: ``[b, h, s_q,
        d_h]``, k: ``[b, h, s_k, d_h]``, allowed: bool broadcastable to ``[b, h, s_q, s_k]``;
        first_row: in an encoder, the key of the first query (q a block of rows).
        Returns ``[b, h, s_q, s_k]``."""
        scale = 1 / math.sqrt(q.shape[-1])  # on k and the table ([s, d_h] values), not on [s, s] scores
        gates = torch.sigmoid(q @ (k * scale).transpose(-1, -2)) * allowed
        positions = contextual_positions(gates, site.stack == "decoder", first_row).clamp(0, self.npos - 1)  # 0: a two-way count's round-off below it
        table = self.embeddings[self.index[site]].to(q.dtype) * scale  # [d_h, P]
        return interpolated_logits(q @ table, positions)
