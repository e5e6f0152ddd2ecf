"""Relative position representations (Shaw et al. 2018).

Shaw, Uszkoreit and Vaswani 2018, "Self-Attention with Relative Position Representations":
    e_ij = q_i . (k_j + a^K_ij) / sqrt(d_h)          (eq. 4)
    z_i  = sum_j alpha_ij (v_j + a^V_ij)              (eq. 3)
    a^K_ij = w^K_{clip(j - i, k)},  a^V_ij = w^V_{clip(j - i, k)},
    clip(x, k) = max(-k, min(k, x))                   (eq. 5-6)
with 2k+1 learned vectors of width d_h per layer for keys and for values, shared across heads
(sec. 3.3). The paper used k = 16. Self-attention only.

Both terms are computed per offset bucket rather than per (i, j) pair: q . w^K_r for every
bucket r is gathered into the logits, and the attention weights are summed per bucket before
multiplying by w^V (sec. 3.3's efficient form), so no [b, h, s, s, d_h] tensor is ever built.
Shapes: b batch, h heads, s sequence, d_h head width, r = 2k+1 offset buckets.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from .base import Geometry, PositionalEncoding, Site, in_blocks, is_causal, scaled_dot_product


def relative_offset_index(q_pos: Tensor, k_pos: Tensor, clip: int) -> Tensor:
    """clip(j - i, k) + k for every (query i, key j): ``[s_q, s_k]`` long in [0, 2k]."""
    return (k_pos[None, :] - q_pos[:, None]).clamp(-clip, clip) + clip


class Relative(PositionalEncoding):
    """Shaw et al.'s clipped relative key and value representations, per layer.

    Args:
        geometry: the model served.
        clip: the clipping distance k (16 in the paper).
    """

    description = "Learned relative key/value vectors for clipped offsets (Shaw et al.)"
    reference = "Shaw et al. 2018, arXiv:1803.02155"

    def __init__(self, geometry: Geometry, clip: int = 16):
        super().__init__(geometry)
        self.clip = clip
        self.index = geometry.self_attention_index
        shape = (len(self.index), 2 * clip + 1, geometry.d_head)
        self.key_vectors = nn.Parameter(torch.randn(shape) * geometry.d_head**-0.5)
        self.value_vectors = nn.Parameter(torch.randn(shape) * geometry.d_head**-0.5)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site) -> Tensor:
        if site.kind == "cross":
            return scaled_dot_product(q, k, v, allowed)
        layer = self.index[site]
        offsets = relative_offset_index(q_pos, k_pos, self.clip)[None, None]  # [1, 1, s_q, s_k]
        block = functools.partial(relative_attention, self.key_vectors[layer], self.value_vectors[layer])
        return in_blocks(block, q, k, v, allowed, offsets, causal=is_causal(allowed, q))


def relative_attention(key_vectors: Tensor, value_vectors: Tensor, q: Tensor, k: Tensor, v: Tensor,
                       allowed: Tensor, offsets: Tensor) -> Tensor:
    """Eq. 3-4 for one block of queries (see :func:`~pebench.encodings.base.in_blocks`).

    Args:
        key_vectors, value_vectors: w^K, w^V of the layer, ``[r, d_h]``.
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``.
        offsets: the bucket of each (query, key), broadcastable to ``[b, h, s_q, s_k]``.
    Returns:
        ``[b, h, s_q, d_h]``.
    """
    b, h, s_q, d_h = q.shape
    offsets = offsets.expand(b, h, s_q, k.shape[2])
    per_bucket = q @ key_vectors.T  # [b, h, s_q, r]
    logits = (q @ k.transpose(-1, -2)).add_(per_bucket.gather(-1, offsets)).mul_(d_h**-0.5)
    weights = logits.masked_fill_(~allowed, float("-inf")).softmax(dim=-1)  # [b, h, s_q, s_k]
    weight_per_bucket = torch.zeros_like(per_bucket).scatter_add_(-1, offsets, weights)  # [b, h, s_q, r]
    return weights @ v + weight_per_bucket @ value_vectors
