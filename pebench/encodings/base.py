"""The positional-encoding plugin contract.

A plugin is a subclass of :class:`PositionalEncoding` registered under the entry-point group
``pebench.encodings``. The model calls its hooks at the places where position can enter a
transformer; a plugin overrides only the hooks it uses, the others are no-ops:

1. :meth:`~PositionalEncoding.positions`: the position index of each token (default 0..L-1);
   :meth:`~PositionalEncoding.batch_positions`: those of a padded batch, shared by its rows
   (``[s]``, the default) or drawn for each example at its own length (``[b, s]``:
   randomized positions).
2. :meth:`~PositionalEncoding.embed`: added to the token embeddings of a stack.
3. :meth:`~PositionalEncoding.query_bias` and :meth:`~PositionalEncoding.key_value_bias`:
   per-position biases of the q and k/v projections (FLOATER), which the model adds within the
   projections' products. Then :meth:`~PositionalEncoding.project_query` and
   :meth:`~PositionalEncoding.project_key_value` transform the projected q, and k and v, in one
   attention site (rotations). Query and key-value hooks are separate so that keys and values
   can be cached during incremental decoding: each token's k and v are projected once, at its
   own position.
4. :meth:`~PositionalEncoding.bias`: an additive attention-logit bias.
5. :meth:`~PositionalEncoding.attend`: the attention itself, for encodings that need the
   weights (Shaw et al.'s value term).

An attention *site* is one attention module of the model: (stack, layer, kind), where stack is
``"encoder"`` or ``"decoder"`` and kind is ``"self"`` or ``"cross"``. In cross-attention the
query positions index the target sequence and the key positions the source sequence.

Positions reach the other hooks as ``[s]`` (every example of the batch at the same positions)
or, from an encoding whose :meth:`~PositionalEncoding.batch_positions` draws per example, as
``[b, s]``; a plugin whose hooks take both (broadcasting over a leading batch dimension) says so
with ``per_example_positions = True``, and only such a plugin can be the base of randomized
positions.

Shapes: b batch, h heads, s (q, k) sequence, d model width, d_h head width.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


class PositionLimitError(ValueError):
    """A position beyond what an encoding can represent was asked for."""


@dataclass(frozen=True)
class Site:
    """One attention module: ``stack`` ("encoder"/"decoder"), ``layer`` index, ``kind``
    ("self"/"cross")."""

    stack: str
    layer: int
    kind: str


@dataclass(frozen=True)
class Geometry:
    """What an encoding is told about the model it serves.

    Args:
        d_model: model width d.
        n_heads: attention heads h (d_h = d / h).
        sites: every attention site of the model, in a fixed order.
        max_length: the longest sequence (tokens, one stack) the task will present.
        train_length: the longest sequence seen in training (None: unknown, taken as
            ``max_length``); RoPE scaling and randomized positions use it.
    """

    d_model: int
    n_heads: int
    sites: tuple[Site, ...]
    max_length: int
    train_length: int | None = None

    @property
    def training_length(self) -> int:
        return self.train_length or self.max_length

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def stacks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(site.stack for site in self.sites))

    @property
    def self_attention_index(self) -> dict[Site, int]:
        """Each self-attention site's index among the self-attention sites (for encodings
        with parameters per self-attention layer)."""
        return {site: i for i, site in enumerate(s for s in self.sites if s.kind == "self")}


@functools.lru_cache(maxsize=16)
def causal_mask(length: int, device: torch.device) -> Tensor:
    """The causal self-attention mask ``[1, 1, length, length]`` (bool, True on and below the
    diagonal: token i sees tokens 0..i). One tensor per (length, device) is shared by every
    caller, so :func:`scaled_dot_product` recognises it by identity, with no comparison and no
    device sync, and lets SDPA skip the masked blocks (``is_causal``)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, bias: Tensor | None = None) -> Tensor:
    """softmax(q k^T / sqrt(d_h) + bias) v over the allowed keys (Vaswani et al. 2017, eq. 1).

    Args:
        q: ``[b, h, s_q, d_h]``; k, v: ``[b, h, s_k, d_h]``.
        allowed: bool, broadcastable to ``[b, h, s_q, s_k]``; True where the query may attend.
            Every query row must allow at least one key (the model guarantees it), so no row
            is ever NaN. The shared :func:`causal_mask` without a bias takes SDPA's
            ``is_causal`` path.
        bias: float, broadcastable to ``[b, h, s_q, s_k]``, added to the scaled logits.
    Returns:
        ``[b, h, s_q, d_h]``.
    """
    causal = is_causal(allowed, q)
    if bias is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) if causal else F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    if mask.requires_grad and q.device.type == "cpu":
        return BiasedAttention.apply(q, k, v, mask, causal)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def is_causal(allowed: Tensor, q: Tensor) -> bool:
    """Whether ``allowed`` is the shared :func:`causal_mask` of q's length (by identity)."""
    return allowed.shape[-2] == allowed.shape[-1] == q.shape[-2] and allowed is causal_mask(q.shape[-2], q.device)


BLOCK_BYTES = 4 << 20  # attention scores per block: the fastest of 0.5-8 MiB on 2 CPU cores (2 MiB of L2 each)
CAUSAL_CHUNKS = 4  # query-row chunks of causal attention


def attention_blocks(q: Tensor, k: Tensor, causal: bool) -> list[tuple[slice, slice, int]]:
    """The blocks in which :class:`BiasedAttention` and Shaw's relative attention are computed:
    (examples, query rows, number of keys) of each, in order.

    Why: where torch's CPU ``scaled_dot_product_attention`` has no fused kernel, the
    ``[b, h, s_q, s_k]`` scores are written out; in blocks of at most :data:`BLOCK_BYTES` they
    never are all at once, and each block's steps (bias, softmax, their gradients) find more of
    their operands in cache. This is query chunking as in Rabe and Staats 2021 ("Self-attention
    Does Not Need O(n^2) Memory", sec. 2), without their key chunking, so each block's softmax
    is whole and exact. Causal attention is cut into :data:`CAUSAL_CHUNKS` chunks of query rows,
    each scored against the keys up to its last row only, the others being masked: 5/8 of the
    scores (the block skipping of fused kernels). Measured on a T5 training step of the d=64
    decoder (b=32, h=4, s=256, 2 CPU cores): 113 ms in 4 MiB blocks, 120 ms with the whole batch
    in each chunk, 163 ms with neither blocks nor chunks. On other devices than the CPU the
    whole batch is one block.

    Args:
        q: ``[b, h, s_q, d_h]``; k: ``[b, h, s_k, d_h]``.
        causal: query i attends to keys 0..i only.
    Raises:
        ValueError: if causal with s_q != s_k.
    """
    b, h, s_q, _ = q.shape
    s_k = k.shape[-2]
    if causal and s_q != s_k:
        raise ValueError(f"causal attention pairs query i with keys 0..i: needs as many queries as keys; got {s_q} and {s_k}")
    if q.device.type != "cpu":  # GPU kernels want one large launch, not many small ones
        return [(slice(None), slice(None), s_k)]
    row_bytes = h * s_k * q.element_size()  # one query row's scores, all heads
    rows = min(s_q, max(1, BLOCK_BYTES // row_bytes), math.ceil(s_q / CAUSAL_CHUNKS) if causal else s_q)
    examples = max(1, BLOCK_BYTES // (rows * row_bytes))
    return [(slice(first, first + examples), slice(row, row + rows), min(row + rows, s_k) if causal else s_k)
            for first in range(0, b, examples) for row in range(0, s_q, rows)]


def as_4d(x: Tensor) -> Tensor:
    """x with leading dimensions of size 1 up to four (``[s_q, s_k]`` -> ``[1, 1, s_q, s_k]``), a view."""
    return x.reshape((1,) * (4 - x.dim()) + x.shape)


def full_mask(mask: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """mask, broadcastable to ``[b, h, s_q, s_k]``, as a ``[1 or b, h, s_q, s_k]`` view (no copy)."""
    mask = as_4d(mask)
    return mask.expand(mask.shape[0], q.shape[1], q.shape[2], k.shape[2])


def mask_block(mask: Tensor, examples: slice, rows: slice, keys: int) -> Tensor:
    """One block of a ``[1 or b, h, s_q, s_k]`` mask: all of its batch dimension when that is 1."""
    return mask[examples if mask.shape[0] > 1 else slice(None), :, rows, :keys]


def autocast_state(device: torch.device) -> dict:
    """The autocast settings in force on device's type, as keyword arguments of
    ``torch.autocast``: a Function's backward runs under them again, as its forward did (what
    ``torch.amp.custom_bwd`` does for one fixed device type; a backward runs outside autocast)."""
    return {"device_type": device.type, "enabled": torch.is_autocast_enabled(device.type), "dtype": torch.get_autocast_dtype(device.type)}


class BiasedAttention(torch.autograd.Function):
    """softmax(q k^T / sqrt(d_h) + mask) v on the CPU for a mask that needs a gradient (T5, FIRE,
    KERPLE), in the blocks of :func:`attention_blocks`, with the backward pass written out.

    Why: torch's CPU ``scaled_dot_product_attention`` has no fused kernel that gives the mask a
    gradient. Left to autograd, the blocks' slicing, padding and concatenation cost more than
    their arithmetic (a training step of the d=64 decoder: 38 ms of attention per layer, 26 ms
    here, 15 ms for SDPA's fused kernel without a bias; b=32, h=4, s=256, 2 CPU cores).

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
            row (:func:`attention_blocks`).
    Returns:
        ``[b, h, s_q, d_h]``.
    Raises:
        ValueError: if causal with s_q != s_k.
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, causal: bool) -> Tensor:
        blocks = attention_blocks(q, k, causal)
        q = q.contiguous() * q.shape[-1] ** -0.5  # scaled once: [s, d_h] values, not [s, s] scores
        k, v = k.contiguous(), v.contiguous()
        full = full_mask(mask, q, k)
        out = torch.empty_like(q)
        weights = []
        for examples, rows, keys in blocks:
            scores = q[examples, :, rows] @ k[examples, :, :keys].transpose(-1, -2)  # [b', h, rows, keys]
            weights.append(scores.add_(mask_block(full, examples, rows, keys)).softmax(dim=-1))
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
                mask_block(d_mask, examples, rows, keys).add_(d_scores if d_mask.shape[0] > 1 else d_scores.sum(0, keepdim=True))
                d_q[examples, :, rows] = d_scores @ k[examples, :, :keys]
                d_k[examples, :, :keys] += d_scores.transpose(-1, -2) @ q[examples, :, rows]
        return d_q.mul_(q.shape[-1] ** -0.5), d_k, d_v, d_mask.sum_to_size(ctx.mask_shape), None


class PositionalEncoding(nn.Module):
    """Base class of every positional-encoding plugin.

    Subclasses set the class attributes ``description`` (one line) and ``reference`` (paper),
    take ``geometry`` plus their card's params as keyword arguments, and set
    ``self.max_positions`` (None = unbounded). ``revision`` (default 1) is raised when a change
    alters what the plugin computes: ``pebench sweep`` then reruns the records of its older
    revisions (they are stale).

    Args:
        geometry: the model the encoding serves.
    """

    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    per_example_positions: ClassVar[bool] = False  # the hooks take pos [b, s] as well as [s]
    revision: ClassVar[int] = 1  # raised when a change alters what the plugin computes: its records become stale

    def __init__(self, geometry: Geometry):
        super().__init__()
        self.geometry = geometry
        self.max_positions: int | None = None

    def positions(self, length: int, device: torch.device | str | None = None) -> Tensor:
        """Position index of each of ``length`` tokens: ``[s]`` long, 0..length-1.

        Raises:
            PositionLimitError: if ``length`` exceeds ``max_positions``.
        """
        self.check_length(length)
        return torch.arange(length, device=device)

    def batch_positions(self, lengths: Tensor, width: int, identity: Tensor, stack: str) -> Tensor:
        """The positions of a right-padded batch of ``width`` tokens: ``[s]`` shared by every row
        (the default: :meth:`positions` of ``width``), or ``[b, s]``, one row per example, for an
        encoding that draws each example's positions at its own length (randomized).

        Args:
            lengths: ``[b]`` long, the tokens of each row that are not padding.
            width: s, the batch's padded length.
            identity: ``[b, *]`` long, right-padded with 0: rows that identify each example
                whatever batch it is in (its source tokens), from which an encoding that draws
                at evaluation seeds each example's draw.
            stack: ``"encoder"`` or ``"decoder"``, the stack the positions serve.
        Raises:
            PositionLimitError: if ``width`` exceeds ``max_positions``.
        """
        return self.positions(width, lengths.device)

    def check_length(self, length: int) -> None:
        """Raise :class:`PositionLimitError` if ``length`` positions are more than this
        encoding can represent."""
        if self.max_positions is not None and length > self.max_positions:
            raise PositionLimitError(
                f"encoding '{type(self).__name__}' represents at most {self.max_positions} "
                f"positions, but a sequence of {length} tokens was given; raise its "
                f"max_positions (e.g. --set encoding.max_positions={length}) or use shorter inputs"
            )

    def prepare(self, num_positions: int, device: torch.device) -> None:
        """Called once per forward pass before any other hook, with a bound on the number of
        positions (largest position index + 1) this pass uses: the model passes its longest
        sequence's length, which bounds the default positions 0..L-1, read on the host (no
        device sync); an encoding whose :meth:`positions` go further (randomized) passes its
        own bound to the encodings it wraps. Encodings with per-pass state (FLOATER's ODE
        solution) compute it here."""

    def embed(self, x: Tensor, pos: Tensor, stack: str) -> Tensor:
        """Token embeddings with position added. x: ``[b, s, d]``, pos: ``[s]``. Returns ``[b, s, d]``.
        This hook, ``project_query`` and ``project_key_value`` receive tensors the model made
        for them alone: with no gradient recorded they may update them in place."""
        return x

    def query_bias(self, pos: Tensor, site: Site) -> Tensor | None:
        """A bias per query position, added by the model within the query projection's product,
        before :meth:`project_query`: q_i = x_i W_q + c_q + b(t_i) (FLOATER, Liu et al. 2020,
        eq. 10). pos: ``[s_q]`` (target positions in cross-attention). Returns ``[s_q, d]``
        (heads side by side, as the projection's output) in any float dtype (the model casts
        it to the projection's), or None. The model never changes it in place, so a view of a
        parameter is a valid answer."""
        return None

    def key_value_bias(self, pos: Tensor, site: Site) -> Tensor | None:
        """A bias per key position for the key-value projection, as :meth:`query_bias`, before
        :meth:`project_key_value`. pos: ``[s_k]`` (source positions in cross-attention, whose
        keys and values incremental decoding projects once). Returns ``[s_k, 2 d]`` (the keys'
        d columns, then the values') or None."""
        return None

    def project_query(self, q: Tensor, pos: Tensor, site: Site) -> Tensor:
        """Position-dependent queries. q: ``[b, h, s_q, d_h]``, pos: ``[s_q]``. Returns the same shape."""
        return q

    def project_key_value(self, k: Tensor, v: Tensor, pos: Tensor, site: Site) -> tuple[Tensor, Tensor]:
        """Position-dependent keys and values. k, v: ``[b, h, s_k, d_h]``, pos: ``[s_k]``.
        Returns (k, v) of the same shapes."""
        return k, v

    def bias(self, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor | None:
        """Additive attention-logit bias broadcastable to ``[b, h, s_q, s_k]``, or None."""
        return None

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site) -> Tensor:
        """The attention output ``[b, h, s_q, d_h]``; see :func:`scaled_dot_product`."""
        return scaled_dot_product(q, k, v, allowed, self.bias(q_pos, k_pos, site))

    def plan(self, length: int) -> dict:
        """Called in evaluation before each length bucket with its longest sequence. An encoding
        that adapts to the evaluation length (RoPE scaling) fixes its behaviour for the bucket
        here and returns what it chose, which the run record stores; most return {}.
        Training (``train()``) undoes any plan."""
        return {}

    def extra_repr(self) -> str:
        return f"max_positions={self.max_positions}"


def require_range(encoding: str, name: str, value: float, *, above: float | None = None, at_least: float | None = None) -> None:
    """Raise ValueError naming ``encoding``, its parameter ``name`` and what it accepts, unless
    ``value`` is above ``above`` and at least ``at_least`` (the plugins' check of their card
    parameters, made when the model is built: before any training)."""
    if (above is not None and not value > above) or (at_least is not None and not value >= at_least):
        bound = f"> {above}" if above is not None else f">= {at_least}"
        raise ValueError(f"{encoding} needs {name} {bound}; got {value}")


def require_even(value: int, what: str, encoding: str) -> None:
    """Raise ValueError unless ``value`` is even (sinusoid and rotation pairs)."""
    if value % 2:
        raise ValueError(f"{encoding} pairs features two by two, so {what} must be even; got {value}")


def inverse_softplus(value: float) -> float:
    """x with softplus(x) = log(1 + e^x) = value (value > 0): parameters kept positive through
    softplus start from ``value``."""
    return math.log(math.expm1(value))


def inverse_frequencies(dim: int, base: float) -> Tensor:
    """theta_i = base^(-2i/dim) for i in 0..dim/2-1 (Vaswani et al. 2017, sec. 3.5;
    Su et al. 2021, eq. 15). Returns ``[dim/2]`` float32."""
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
