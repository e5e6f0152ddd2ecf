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
   weights (Shaw et al.'s value term) or the logits (CoPE, DAPE); the kernels are
   :mod:`pebench.encodings.attention`'s, and the model says when the attention is causal (``causal``).
6. :meth:`~PositionalEncoding.key_state`: a value per key token and head computed from the
   attention's input at that token (the Forgetting Transformer's forget gates); the model keeps
   it beside the token's key and value (in the cache, in incremental decoding) and passes it to
   :meth:`~PositionalEncoding.attend` as ``key_state``. An encoding that returns None (every
   encoding but one that overrides the hook) is called without it, so an ``attend`` that takes
   no ``key_state`` keeps working.
7. Structural positions: positions that only the task knows (a digit's significance in its
   number; :mod:`pebench.tasks.base`). An encoding that sets ``needs_structure = True`` is given
   them in :meth:`~PositionalEncoding.batch_positions` as ``structure`` ``[b, s]`` and returns
   positions made from them (Abacus embeddings, position coupling); the model refuses it with
   :class:`StructureError` where none are given, and :func:`pebench.running.train.build_model` refuses
   it on a task without them, before training. Every other encoding is called as before.

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

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from pebench.core.values import broken_bounds, check_even
from pebench.encodings.attention import scaled_dot_product


class PositionLimitError(ValueError):
    """A position beyond what an encoding can represent was asked for."""


class StructureError(ValueError):
    """An encoding that needs structural positions was given none (its task has none)."""


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
        train_length: the longest sequence (tokens, one stack) seen in training, as the model
            is told it (None: unknown); an encoding reads :attr:`training_length`.
    """

    d_model: int
    n_heads: int
    sites: tuple[Site, ...]
    max_length: int
    train_length: int | None = None

    @property
    def training_length(self) -> int:
        """L, the longest training sequence an encoding plans for: ``train_length``, or
        ``max_length`` where it is unknown (RoPE scaling, CoPE's and FLOATER's position counts)."""
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
    needs_structure: ClassVar[bool] = False  # batch_positions takes the task's structural positions (hook 7)
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
            structure: ``[b, s]`` long, given (as a keyword) only to an encoding with
                ``needs_structure``, whose override adds it to its signature: the structural
                position of each token (0 for tokens without one and for padding).
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

    def key_state(self, x: Tensor, pos: Tensor, site: Site) -> Tensor | None:
        """A value per key token and head from the attention's key-side input. x: ``[b, s_k, d]``
        (the normalised states the keys and values are projected from), pos: ``[s_k]``. Returns
        ``[b, h, s_k]`` float, or None (the default: no key state). It is computed once per
        token, kept with its key (concatenated along s_k in incremental decoding, reordered with
        the keys in beam search) and given to :meth:`attend` as ``key_state``, ``[b, h, s_k]``
        over every key attended."""
        return None

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        """The attention output ``[b, h, s_q, d_h]``; see :func:`pebench.encodings.attention.scaled_dot_product`.
        ``causal``: the model's word that ``allowed`` is the causal mask of a full pass (a
        decoder's self-attention over s_q = s_k tokens), for the kernels' causal paths."""
        return scaled_dot_product(q, k, v, allowed, self.bias(q_pos, k_pos, site), causal)

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
    limits = broken_bounds(value, at_least=at_least, above=above)
    if limits:
        raise ValueError(f"{encoding} needs {name} {limits}; got {value}")


def require_even(value: int, what: str, encoding: str) -> None:
    """Raise ValueError unless ``value`` is even (sinusoid and rotation pairs); ``what`` names it."""
    check_even(what, value, f"{encoding} pairs features two by two")


def inverse_softplus(value: float) -> float:
    """x with softplus(x) = log(1 + e^x) = value (value > 0): parameters kept positive through
    softplus start from ``value``."""
    return math.log(math.expm1(value))


def inverse_frequencies(dim: int, base: float) -> Tensor:
    """theta_i = base^(-2i/dim) for i in 0..dim/2-1 (Vaswani et al. 2017, sec. 3.5;
    Su et al. 2021, eq. 15). Returns ``[dim/2]`` float32."""
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
