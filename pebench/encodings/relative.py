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
In causal attention at consecutive positions only the k diagonals up to the main one have
buckets of their own, so only they are read and written (:class:`Banded`).
Shapes: b batch, h heads, s sequence, d_h head width, r = 2k+1 offset buckets.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from pebench.encodings.attention import as_4d, attention_tiles, autocast_state, full_mask, mask_tile, scaled_dot_product
from pebench.encodings.base import Geometry, PositionalEncoding, Site, require_range


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
        require_range("Shaw's relative encoding", "clip", clip, at_least=1)
        self.clip = clip
        self.index = geometry.self_attention_index
        shape = (len(self.index), 2 * clip + 1, geometry.d_head)
        self.key_vectors = nn.Parameter(torch.randn(shape) * geometry.d_head**-0.5)
        self.value_vectors = nn.Parameter(torch.randn(shape) * geometry.d_head**-0.5)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        if site.kind == "cross":
            return scaled_dot_product(q, k, v, allowed)
        layer = self.index[site]
        # on the CPU, where gathering by bucket takes a fifth of a training step (d=64, s=256), and
        # with the same consecutive positions for queries and keys (not randomized positions)
        banded = causal and q.device.type == "cpu" and torch.equal(q_pos, k_pos) and bool((q_pos.diff() == 1).all())
        return RelativeAttention.apply(
            q, k, v, allowed, q_pos, k_pos, self.key_vectors[layer], self.value_vectors[layer], causal, banded, torch.is_grad_enabled()
        )


class RelativeAttention(torch.autograd.Function):
    """Eq. 3-4 in the blocks of :func:`~pebench.encodings.attention.attention_tiles`, with the backward
    pass written out (as :class:`~pebench.encodings.attention.BiasedAttention`, whose docstring says
    why). With Q scaled by 1/sqrt(d_h), P the attention weights, R the bucket of each (query, key)
    and, per block, the per-bucket terms
        E = Q (w^K)^T  [rows, r],   W = P summed per bucket  [rows, r]:
    forward:   S = Q K^T + E gathered by R,   O = P V + W w^V;
    backward:  dP = dO V^T + (dO (w^V)^T) gathered by R,   dS = P * (dP - rowsum(dO * O)),
               dE = dS summed per bucket,   dQ = (dS K + dE w^K) / sqrt(d_h),   dK = dS^T Q,
               dV = P^T dO,   dw^K = dE^T Q,   dw^V = W^T dO.
    The gathers and sums by bucket go through R (:class:`Gathered`), or, in causal attention,
    through the k diagonals up to the main one (:class:`Banded`). Not twice differentiable.

    Args (of ``apply``):
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``; every query row allows a key.
        q_pos: ``[s_q]``, k_pos: ``[s_k]`` positions (long).
        key_vectors, value_vectors: w^K, w^V of the layer, ``[r, d_h]``.
        causal: ``allowed`` is causal, so each chunk of query rows skips the keys after its last row.
        banded: causal, with the same consecutive positions for queries and keys, so the
            per-bucket terms may be read along diagonals.
        keep: keep the attention weights for the backward pass (``torch.is_grad_enabled()``
            where apply is called; in a Function's forward it is always False, and a parameter's
            view made under ``no_grad`` still has ``requires_grad``). Else one block at a time.
    The backward pass runs under the forward's autocast settings.

    Returns:
        ``[b, h, s_q, d_h]``.
    Raises:
        ValueError: if causal with s_q != s_k.
    """

    @staticmethod
    def forward(
        ctx,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        allowed: Tensor,
        q_pos: Tensor,
        k_pos: Tensor,
        key_vectors: Tensor,
        value_vectors: Tensor,
        causal: bool,
        banded: bool,
        keep: bool,
    ) -> Tensor:
        blocks = _blocks(attention_tiles(q, k, causal), q_pos, k_pos, key_vectors, banded)
        order = blocks[0][1].order
        q = order(q) * q.shape[-1] ** -0.5
        k, v = k.contiguous(), v.contiguous()
        allowed = full_mask(order(as_4d(allowed)), q, k)
        out = torch.empty_like(q)
        weights, per_bucket_weights = [], []
        for examples, block in blocks:
            rows, keys, used = block.rows, block.keys, block.used
            q_block = q[examples, :, rows]
            scores = block.add(q_block @ k[examples, :, :keys].transpose(-1, -2), q_block @ key_vectors[:used].T)[0]
            p = scores.masked_fill_(~mask_tile(allowed, examples, rows, keys), float("-inf")).softmax(dim=-1)  # P
            per_bucket = block.sum(p, row_total=1.0)  # W
            out[examples, :, rows] = (p @ v[examples, :, :keys]).add_(per_bucket @ value_vectors[:used])
            if keep:
                weights.append(p)
                per_bucket_weights.append(per_bucket)
        ctx.save_for_backward(q, k, v, out, key_vectors, value_vectors, *weights, *per_bucket_weights)
        ctx.blocks, ctx.autocast = blocks, autocast_state(q.device)  # the blocks as forward took them, not built again
        return order(out)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v, out, key_vectors, value_vectors, *saved = ctx.saved_tensors
        blocks = ctx.blocks
        weights, per_bucket_weights = saved[: len(blocks)], saved[len(blocks) :]
        order = blocks[0][1].order
        with torch.autocast(**ctx.autocast):
            d_out = order(d_out)
            row_sums = (d_out * out).sum(dim=-1, keepdim=True)  # rowsum(dO * O) = rowsum(P * dP)
            d_q, d_k, d_v = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
            d_key_vectors, d_value_vectors = torch.zeros_like(key_vectors), torch.zeros_like(value_vectors)
            for (examples, block), p, per_bucket in zip(blocks, weights, per_bucket_weights, strict=True):
                rows, keys, used = block.rows, block.keys, block.used
                q_block, d_out_block = q[examples, :, rows], d_out[examples, :, rows]
                d_v[examples, :, :keys] += p.transpose(-1, -2) @ d_out_block
                d_value_vectors[:used] += per_bucket.flatten(0, 2).T @ d_out_block.flatten(0, 2)
                d_p, left_out = block.add(d_out_block @ v[examples, :, :keys].transpose(-1, -2), d_out_block @ value_vectors[:used].T)
                d_scores = d_p.sub_(row_sums[examples, :, rows] - left_out).mul_(p)  # dS
                d_per_bucket = block.sum(d_scores, row_total=0.0)  # dE; the rows of dS sum to 0
                d_q[examples, :, rows] = (d_scores @ k[examples, :, :keys]).add_(d_per_bucket @ key_vectors[:used])
                d_k[examples, :, :keys] += d_scores.transpose(-1, -2) @ q_block
                d_key_vectors[:used] += d_per_bucket.flatten(0, 2).T @ q_block.flatten(0, 2)
        return order(d_q.mul_(q.shape[-1] ** -0.5)), d_k, d_v, None, None, None, d_key_vectors, d_value_vectors, None, None, None


def _blocks(plan: list[tuple[slice, slice, int]], q_pos: Tensor, k_pos: Tensor, key_vectors: Tensor, banded: bool) -> list[tuple[slice, Gathered | Banded]]:
    """The blocks of a plan of :func:`~pebench.encodings.attention.attention_tiles` as (examples,
    chunk of query rows), one chunk object per chunk, shared by its blocks of examples:
    :class:`Banded` if banded and the first chunk has more than k rows (the later chunks start
    past key k), else :class:`Gathered`."""
    clip, s_q = len(key_vectors) // 2, len(q_pos)  # k, of 2k + 1 buckets
    kind = Banded if banded and len(range(s_q)[plan[0][1]]) > clip else Gathered
    chunks = {}
    for _, rows, keys in plan:
        if (rows.start, keys) not in chunks:
            chunks[rows.start, keys] = Banded(rows, keys, clip, s_q, q_pos.device) if kind is Banded else Gathered(rows, keys, q_pos, k_pos, clip)
    return [(examples, chunks[rows.start, keys]) for examples, rows, keys in plan]


class Gathered:
    """One chunk of query rows whose per-bucket terms are gathered, and summed, through the
    bucket of each (query, key): any mask.

    Attributes:
        rows, keys: the chunk (:func:`~pebench.encodings.attention.attention_tiles`); rows of the
            query order of :meth:`order`.
        used: the buckets 0..used-1 that the chunk's per-bucket terms cover (all 2k + 1).
        buckets: the bucket of each of the chunk's (query, key) pairs, ``[rows, keys]`` long.
    """

    def __init__(self, rows: slice, keys: int, q_pos: Tensor, k_pos: Tensor, clip: int):
        self.rows, self.keys, self.used = rows, keys, 2 * clip + 1
        self.buckets = relative_offset_index(q_pos[rows], k_pos[:keys], clip)  # [rows, keys]

    @staticmethod
    def order(x: Tensor) -> Tensor:
        """x ``[b, h, s_q, ...]`` with its queries in the order the blocks take them: as given,
        contiguous."""
        return x.contiguous()

    def add(self, pairwise: Tensor, per_bucket: Tensor) -> tuple[Tensor, Tensor | float]:
        """pairwise ``[b', h, rows, keys]`` plus per_bucket ``[b', h, rows, used]`` at each pair's
        bucket, in place; returns it and what was left out of every row (nothing here)."""
        return pairwise.add_(per_bucket.gather(-1, self.buckets.expand(*per_bucket.shape[:2], -1, -1))), 0.0

    def sum(self, pairwise: Tensor, row_total: float) -> Tensor:
        """pairwise ``[b', h, rows, keys]`` summed per bucket: ``[b', h, rows, used]``
        (row_total, each row's sum, is not needed here)."""
        index = self.buckets.expand(*pairwise.shape[:2], -1, -1)
        return pairwise.new_zeros(*pairwise.shape[:-1], self.used).scatter_add_(-1, index, pairwise)


class Banded:
    """One chunk of query rows of causal attention, whose per-bucket terms are read and written along
    diagonals: query i and key j are in bucket k - (i - j) for i - j < k, in bucket 0 further
    back, never in buckets k+1..2k (used = k + 1). So bucket 0's term is left out of all pairs
    in :meth:`add` (a constant per row: the softmax does not change; in dP the caller takes it
    off rowsum(dO * O) instead), the others are added to the k diagonals j = i - k + 1, ..., i;
    in :meth:`sum` bucket 0 gets the row's total less the diagonals' (weights sum to 1, and dS to
    0, over each row). With the queries in reverse order (:meth:`order`), the k diagonals of a
    contiguous ``[rows, keys]`` block are one strided view (row stride keys - 1).

    Entries of the view before key 0 (the first k - 1 rows of the first chunk) fall on masked
    pairs of the next query in the view's order (as the first chunk has more than k rows), and
    are kept at zero. The attributes and methods are :class:`Gathered`'s, with used = k + 1.
    """

    def __init__(self, rows: slice, keys: int, clip: int, s_q: int, device: torch.device):
        first, last = rows.indices(s_q)[:2]
        self.rows, self.keys = slice(s_q - last, s_q - first), keys  # rows in reverse order
        self.clip, self.used = clip, clip + 1
        query = torch.arange(last - 1, first - 1, -1, device=device)  # reversed rows
        self.outside = (query[:, None] - clip + 1 + torch.arange(clip, device=device)) < 0  # key < 0: [rows, k]

    @staticmethod
    def order(x: Tensor) -> Tensor:
        """x ``[b, h, s_q, ...]`` with its queries in reverse order (a new tensor)."""
        return x.flip(2)

    def add(self, pairwise: Tensor, per_bucket: Tensor) -> tuple[Tensor, Tensor]:
        far = per_bucket[..., :1]  # bucket 0, [b', h, rows, 1]
        self.diagonals(pairwise).add_((per_bucket[..., 1:] - far).masked_fill_(self.outside, 0))
        return pairwise, far

    def sum(self, pairwise: Tensor, row_total: float) -> Tensor:
        near = self.diagonals(pairwise).masked_fill(self.outside, 0)  # buckets 1..k: [b', h, rows, k]
        return torch.cat((row_total - near.sum(dim=-1, keepdim=True), near), dim=-1)

    def diagonals(self, pairwise: Tensor) -> Tensor:
        """The view ``[b', h, rows, k]`` of the k diagonals of pairwise ``[b', h, rows, keys]``
        (contiguous, as every product and softmax here is; queries in reverse order): entry
        (i, c) is the pair of query i and key i - k + 1 + c, bucket c + 1."""
        b, h, rows, keys = pairwise.shape
        return pairwise.as_strided((b, h, rows, self.clip), (h * rows * keys, rows * keys, keys - 1, 1), pairwise.storage_offset() + keys - self.clip)
