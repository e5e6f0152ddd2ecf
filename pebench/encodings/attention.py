"""The attention kernels: scaled dot-product attention over a mask and an optional additive bias,
on torch's ``scaled_dot_product_attention`` where it serves, and on the CPU in blocks with a
written-out backward pass where the bias needs a gradient (:class:`BiasedAttention`).

The model says when attention is causal (``causal=True``: the full pass of a decoder's
self-attention); nothing here infers it from the mask.
Shapes: b batch, h heads, s (q, k) sequence, d_h head width.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


@functools.lru_cache(maxsize=16)
def causal_mask(length: int, device: torch.device) -> Tensor:
    """The causal self-attention mask ``[1, 1, length, length]`` (bool, True on and below the
    diagonal: token i sees tokens 0..i), one tensor per (length, device), built once."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, bias: Tensor | None = None, causal: bool = False) -> Tensor:
    """softmax(q k^T / sqrt(d_h) + bias) v over the allowed keys (Vaswani et al. 2017, eq. 1).

    Args:
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``; True where the query may attend.
            Every query row must allow at least one key (the model guarantees it), so no row
            is ever NaN.
        bias: float, broadcastable to ``[b, h, s_q, s_k]``, added to the scaled logits.
        causal: the caller's word that ``allowed`` is the causal mask of s_q = s_k tokens
            (query i sees keys 0..i): without a bias SDPA then takes its ``is_causal`` path,
            which skips the masked blocks, and with one the CPU blocks skip the keys after
            each chunk's last row (:func:`attention_tiles`).
    Returns:
        ``[b, h, s_q, d_h]``.
    Raises:
        ValueError: if causal with s_q != s_k.
    """
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention pairs query i with keys 0..i: needs as many queries as keys; got {q.shape[-2]} and {k.shape[-2]}")
    if bias is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) if causal else F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    if mask.requires_grad and q.device.type == "cpu":
        return BiasedAttention.apply(q, k, v, mask, causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


TILE_BYTES = 4 << 20  # attention scores per block: the fastest of 0.5-8 MiB on 2 CPU cores (2 MiB of L2 each)
CAUSAL_CHUNKS = 4  # query-row chunks of causal attention


def attention_tiles(q: Tensor, k: Tensor, causal: bool, pair_values: int | None = None) -> list[tuple[slice, slice, int]]:
    """The blocks in which :class:`BiasedAttention`, Shaw's relative attention and
    :func:`tiled_attention` (CoPE, DAPE) are computed: (examples, query rows, number of keys) of
    each, in order.

    Why: where torch's CPU ``scaled_dot_product_attention`` has no fused kernel, the
    ``[b, h, s_q, s_k]`` scores are written out; in blocks of at most :data:`TILE_BYTES` they
    never are all at once, and each block's steps (bias, softmax, their gradients) find more of
    their operands in cache. This is query chunking as in Rabe and Staats 2021 ("Self-attention
    Does Not Need O(n^2) Memory", sec. 2), without their key chunking, so each block's softmax
    is whole and exact. Causal attention is cut into :data:`CAUSAL_CHUNKS` chunks of query rows,
    each scored against the keys up to its last row only, the others being masked: 5/8 of the
    scores (the block skipping of fused kernels; ``docs/throughput.md`` has the timings). On
    other devices than the CPU the whole batch is one block.

    Args:
        q: ``[b, h, s_q, d_h]``; k: ``[b, h, s_k, d_h]``.
        causal: query i attends to keys 0..i only.
        pair_values: the values that the widest tensor of a block holds per (query, key) pair,
            all heads together; None: h, the scores. A bias whose intermediates are wider (DAPE's
            MLP, ``mlp_width`` features per pair) sizes the blocks by them.
    Raises:
        ValueError: if causal with s_q != s_k.
    """
    b, h, s_q, _ = q.shape
    s_k = k.shape[-2]
    if causal and s_q != s_k:
        raise ValueError(f"causal attention pairs query i with keys 0..i: needs as many queries as keys; got {s_q} and {s_k}")
    if q.device.type != "cpu":  # GPU kernels want one large launch, not many small ones
        return [(slice(None), slice(None), s_k)]
    row_bytes = (pair_values or h) * s_k * q.element_size()  # one query row's widest tensor
    rows = min(s_q, max(1, TILE_BYTES // row_bytes), math.ceil(s_q / CAUSAL_CHUNKS) if causal else s_q)
    examples = max(1, TILE_BYTES // (rows * row_bytes))
    return [
        (slice(first, first + examples), slice(row, row + rows), min(row + rows, s_k) if causal else s_k)
        for first in range(0, b, examples)
        for row in range(0, s_q, rows)
    ]


def tiled_attention(
    q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, bias_of: Callable[..., Tensor], causal: bool = False, pair_values: int | None = None
) -> Tensor:
    """softmax(q k^T / sqrt(d_h) + bias) v over the allowed keys, for a bias that is computed from
    the queries and keys themselves, one block of :func:`attention_tiles` at a time.

    Why: an encoding whose bias is made at every (query, key) from q and k (CoPE's gated counts,
    DAPE's MLP of the logits) writes a dozen ``[b, h, s_q, s_k]`` tensors on the way; block by
    block each fits in cache, and causal chunks skip the keys after their last row. The gain is
    time, and memory in evaluation only: in training autograd keeps every block's intermediates
    for the backward pass, as many as the whole batch's. Measured on
    one thread beside two other jobs, 4 heads, causal: a CoPE attention's forward and backward
    0.55-0.64 s against 1.8-2.8 s whole (b = 32, s = 256, d_h = 16), its forward alone 0.7-0.8 s
    against 2.8-2.9 s (b = 8, s = 1,024, d_h = 32); the same values.

    Args:
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``.
        bias_of: ``bias_of(q_block, k_block, allowed_block, tile)``: the bias of one block,
            broadcastable to ``[b', h, rows, keys]``, from the block's queries ``[b', h, rows,
            d_h]``, keys ``[b', h, keys, d_h]``, mask and its ``(examples, rows, keys)`` (slices of
            examples and query rows, the number of keys). A query row's bias may depend on that
            row and the block's keys alone: not on the other rows, nor on the keys after the
            block's (in a causal chunk, those after its last row; masked keys must weigh nothing,
            as CoPE's gates of masked keys are 0).
        causal: ``allowed`` is the causal mask (see :func:`scaled_dot_product`).
        pair_values: the values per (query, key) pair of ``bias_of``'s widest intermediate
            (:func:`attention_tiles`); None: the scores'.
    Returns:
        ``[b, h, s_q, d_h]``.
    """
    full = full_mask(allowed, q, k)
    pieces = []
    for examples, rows, keys in attention_tiles(q, k, causal, pair_values):
        q_block, k_block, block = q[examples, :, rows], k[examples, :, :keys], mask_tile(full, examples, rows, keys)
        bias = bias_of(q_block, k_block, block, (examples, rows, keys))
        pieces.append((examples, scaled_dot_product(q_block, k_block, v[examples, :, :keys], block, bias)))
    by_examples = itertools.groupby(pieces, key=lambda piece: piece[0])  # the tiles run over the rows within each group of examples
    return torch.cat([torch.cat([out for _, out in group], dim=2) for _, group in by_examples], dim=0)


def as_4d(x: Tensor) -> Tensor:
    """x with leading dimensions of size 1 up to four (``[s_q, s_k]`` -> ``[1, 1, s_q, s_k]``), a view."""
    return x.reshape((1,) * (4 - x.dim()) + x.shape)


def full_mask(mask: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """mask, broadcastable to ``[b, h, s_q, s_k]``, as a ``[1 or b, h, s_q, s_k]`` view (no copy)."""
    mask = as_4d(mask)
    return mask.expand(mask.shape[0], q.shape[1], q.shape[2], k.shape[2])


def mask_tile(mask: Tensor, examples: slice, rows: slice, keys: int) -> Tensor:
    """One block of a ``[1 or b, h, s_q, s_k]`` mask: all of its batch dimension when that is 1."""
    return mask[examples if mask.shape[0] > 1 else slice(None), :, rows, :keys]


def autocast_state(device: torch.device) -> dict:
    """The autocast settings in force on device's type, as keyword arguments of
    ``torch.autocast``: a Function's backward runs under them again, as its forward did (what
    ``torch.amp.custom_bwd`` does for one fixed device type; a backward runs outside autocast)."""
    return {"device_type": device.type, "enabled": torch.is_autocast_enabled(device.type), "dtype": torch.get_autocast_dtype(device.type)}


class BiasedAttention(torch.autograd.Function):
    """softmax(q k^T / sqrt(d_h) + mask) v on the CPU for a mask that needs a gradient (T5, FIRE,
    KERPLE), in the blocks of :func:`attention_tiles`, with the backward pass written out.

    Why: torch's CPU ``scaled_dot_product_attention`` has no fused kernel that gives the mask a
    gradient. Left to autograd, the blocks' slicing, padding and concatenation cost more than
    their arithmetic (``docs/throughput.md`` has the timings).

    The gradient is FlashAttention's (Dao et al. 2022, "FlashAttention", appendix B.2), with S the
    scaled and masked scores, P = softmax(S), O = P v and dO the output's gradient:
        dV = P^T dO,   dP = dO V^T,   dS = P * (dP - rowsum(dO * O)),
        dQ = dS K / sqrt(d_h),   dK = dS^T Q / sqrt(d_h),   dmask = dS summed to mask's shape.
    Every block's P is kept from the forward pass (the memory autograd would keep). The backward
    pass runs under the forward's autocast settings. Not twice differentiable.

    Args (of ``apply``):
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        mask: float, broadcastable to ``[b, h, s_q, s_k]``, -inf where a query may not attend;
            every query row allows at least one key.
        causal: the mask is causal, so each chunk of query rows skips the keys after its last
            row (:func:`attention_tiles`).
    Returns:
        ``[b, h, s_q, d_h]``.
    Raises:
        ValueError: if causal with s_q != s_k.
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, causal: bool) -> Tensor:
        blocks = attention_tiles(q, k, causal)
        q = q.contiguous() * q.shape[-1] ** -0.5  # scaled once: [s, d_h] values, not [s, s] scores
        k, v = k.contiguous(), v.contiguous()
        full = full_mask(mask, q, k)
        out = torch.empty_like(q)
        weights = []
        for examples, rows, keys in blocks:
            scores = q[examples, :, rows] @ k[examples, :, :keys].transpose(-1, -2)  # [b', h, rows, keys]
            weights.append(scores.add_(mask_tile(full, examples, rows, keys)).softmax(dim=-1))
            out[examples, :, rows] = weights[-1] @ v[examples, :, :keys]  # a product into a strided view is 2x slower
        ctx.save_for_backward(q, k, v, out, *weights)
        ctx.blocks, ctx.mask_shape, ctx.full_shape, ctx.autocast = blocks, mask.shape, full.shape, autocast_state(q.device)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor | None, None]:
        q, k, v, out, *weights = ctx.saved_tensors
        with torch.autocast(**ctx.autocast):
            d_out = d_out.contiguous()
            row_sums = (d_out * out).sum(dim=-1, keepdim=True)  # rowsum(dO * O) = rowsum(P * dP)
            d_q, d_k, d_v, d_mask = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v), q.new_zeros(ctx.full_shape)
            for (examples, rows, keys), p in zip(ctx.blocks, weights, strict=True):
                d_out_block = d_out[examples, :, rows]
                d_v[examples, :, :keys] += p.transpose(-1, -2) @ d_out_block
                d_scores = (d_out_block @ v[examples, :, :keys].transpose(-1, -2)).sub_(row_sums[examples, :, rows]).mul_(p)
                mask_tile(d_mask, examples, rows, keys).add_(d_scores if d_mask.shape[0] > 1 else d_scores.sum(0, keepdim=True))
                d_q[examples, :, rows] = d_scores @ k[examples, :, :keys]
                d_k[examples, :, :keys] += d_scores.transpose(-1, -2) @ q[examples, :, rows]
        return d_q.mul_(q.shape[-1] ** -0.5), d_k, d_v, d_mask.sum_to_size(ctx.mask_shape), None
