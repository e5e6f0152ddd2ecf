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

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .base import Geometry, PositionalEncoding, Site, attention_blocks, full_mask, is_causal, mask_block, scaled_dot_product


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
        offsets = relative_offset_index(q_pos, k_pos, self.clip)  # [s_q, s_k]
        return RelativeAttention.apply(q, k, v, allowed, offsets, self.key_vectors[layer], self.value_vectors[layer], is_causal(allowed, q))


class RelativeAttention(torch.autograd.Function):
    """Eq. 3-4 in the blocks of :func:`~pebench.encodings.base.attention_blocks`, with the backward
    pass written out (as :class:`~pebench.encodings.base.BiasedAttention`, whose docstring says
    why). With Q scaled by 1/sqrt(d_h), P the attention weights, R the bucket of each (query, key)
    and, per block, the per-bucket terms
        E = Q (w^K)^T  [rows, r],   W = P summed per bucket  [rows, r]:
    forward:   S = Q K^T + E gathered by R,   O = P V + W w^V;
    backward:  dP = dO V^T + (dO (w^V)^T) gathered by R,   dS = P * (dP - rowsum(dO * O)),
               dE = dS summed per bucket,   dQ = (dS K + dE w^K) / sqrt(d_h),   dK = dS^T Q,
               dV = P^T dO,   dw^K = dE^T Q,   dw^V = W^T dO.
    Not twice differentiable.

    Args (of ``apply``):
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``; every query row allows a key.
        offsets: ``[s_q, s_k]`` long, the bucket of each (query, key) (:func:`relative_offset_index`).
        key_vectors, value_vectors: w^K, w^V of the layer, ``[r, d_h]``.
        causal: ``allowed`` is causal, so each chunk of query rows skips the keys after its last row.
    Returns:
        ``[b, h, s_q, d_h]``.
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, offsets: Tensor, key_vectors: Tensor,
                value_vectors: Tensor, causal: bool) -> Tensor:
        blocks = attention_blocks(q, k, causal)
        q = q.contiguous() * q.shape[-1] ** -0.5
        k, v = k.contiguous(), v.contiguous()
        allowed = full_mask(allowed, q, k)
        out = torch.empty_like(q)
        weights, per_bucket_weights = [], []
        for examples, rows, keys in blocks:
            q_block = q[examples, :, rows]
            buckets = _buckets(offsets, q_block, rows, keys)
            scores = (q_block @ k[examples, :, :keys].transpose(-1, -2)).add_((q_block @ key_vectors.T).gather(-1, buckets))
            p = scores.masked_fill_(~mask_block(allowed, examples, rows, keys), float("-inf")).softmax(dim=-1)
            per_bucket = q_block.new_zeros(*p.shape[:-1], len(key_vectors)).scatter_add_(-1, buckets, p)  # W
            out[examples, :, rows] = (p @ v[examples, :, :keys]).add_(per_bucket @ value_vectors)
            if any(ctx.needs_input_grad):  # kept for backward; in evaluation one block at a time
                weights.append(p)
                per_bucket_weights.append(per_bucket)
        ctx.save_for_backward(q, k, v, out, offsets, key_vectors, value_vectors, *weights, *per_bucket_weights)
        ctx.causal = causal
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, out, offsets, key_vectors, value_vectors, *saved = ctx.saved_tensors
        blocks = attention_blocks(q, k, ctx.causal)
        weights, per_bucket_weights = saved[:len(blocks)], saved[len(blocks):]
        d_out = d_out.contiguous()
        row_sums = (d_out * out).sum(dim=-1, keepdim=True)  # rowsum(dO * O) = rowsum(P * dP)
        d_q, d_k, d_v = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        d_key_vectors, d_value_vectors = torch.zeros_like(key_vectors), torch.zeros_like(value_vectors)
        for (examples, rows, keys), p, per_bucket in zip(blocks, weights, per_bucket_weights):
            q_block, d_out_block = q[examples, :, rows], d_out[examples, :, rows]
            buckets = _buckets(offsets, q_block, rows, keys)
            d_v[examples, :, :keys] += p.transpose(-1, -2) @ d_out_block
            d_value_vectors += per_bucket.flatten(0, 2).T @ d_out_block.flatten(0, 2)
            d_p = (d_out_block @ v[examples, :, :keys].transpose(-1, -2)).add_((d_out_block @ value_vectors.T).gather(-1, buckets))
            d_scores = d_p.sub_(row_sums[examples, :, rows]).mul_(p)
            d_per_bucket = torch.zeros_like(per_bucket).scatter_add_(-1, buckets, d_scores)  # dE
            d_q[examples, :, rows] = (d_scores @ k[examples, :, :keys]).add_(d_per_bucket @ key_vectors)
            d_k[examples, :, :keys] += d_scores.transpose(-1, -2) @ q_block
            d_key_vectors += d_per_bucket.flatten(0, 2).T @ q_block.flatten(0, 2)
        return d_q.mul_(q.shape[-1] ** -0.5), d_k, d_v, None, None, d_key_vectors, d_value_vectors, None


def _buckets(offsets: Tensor, q_block: Tensor, rows: slice, keys: int) -> Tensor:
    """The buckets of one block, ``[b', h, rows, keys]`` (a view of offsets ``[s_q, s_k]``)."""
    return offsets[rows, :keys].expand(*q_block.shape[:2], -1, -1)
