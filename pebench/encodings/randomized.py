"""Randomized positional encodings.

Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
Transformers" (arXiv:2305.16843), sec. 3: a sequence of length n gets the positions of n indices
drawn without replacement from [0, L) and sorted, instead of 0..n-1, so that a base encoding
sees positions up to L while training only on short sequences. As in the paper and the authors'
code (google-deepmind/randomized_positional_encodings, ``_get_random_positions``, used in
training and evaluation alike), evaluation draws too (``eval_positions = "random"``, the
default). ``"arange"`` (0..n-1) and ``"stride"`` (k * i with k = L // the task's longest
sequence) are deterministic alternatives, not the paper's.

Each example gets a draw of its own length, as in the paper (whose batches hold one length):
in a right-padded batch, row i's first n_i positions are its sorted draw and its padding sits at
position 0 (:meth:`Randomized.batch_positions`, positions ``[b, s]``). Training draws from
torch's generator (the run's stream); evaluation draws each example's positions from a generator
seeded by torch's seed (the evaluation seed and the bucket, set by
:func:`pebench.running.evaluation.seeded`), the stack and the example's source tokens, so an example's
positions, and so its score, are the same at any batch size and in any batch order, and every
run sees the same ones. Greedy decoding draws once per example for the longest sequence it can
reach, prompt and output together, so cached keys and later queries share one draw
(:mod:`pebench.model.decoding`).

Where pebench differs: L defaults to 4x the task's longest sequence (the authors' code: 2,048
for evaluation lengths up to 500). Draws are made on the CPU and moved to the device, so that a
run's positions do not depend on the device.
The wrapper passes every hook through to the base encoding named in the card, built for
L positions (so a learned table covers [0, L)); the base must take per-example positions
(``per_example_positions``).
"""

from __future__ import annotations

import dataclasses
import hashlib

import torch
from torch import Tensor

from pebench.encodings.base import Geometry, PositionalEncoding, PositionLimitError, Site

EVAL_POSITIONS = ("random", "arange", "stride")


class Randomized(PositionalEncoding):
    """Sorted random positions from [0, L), around a base encoding.

    Args:
        geometry: the model served.
        base: the wrapped encoding's plugin name (sinusoidal, learned, rope, relative, alibi, ...).
        max_position: L; default 4 x the task's longest sequence.
        eval_positions: ``"random"`` (as in training), ``"arange"`` or ``"stride"`` (see the
            module docstring).
        base_params: the wrapped encoding's params.
    Raises:
        ValueError: for an unknown ``eval_positions``, an L below 1, or a base whose hooks
            take no per-example positions (``per_example_positions``); UnknownNameError for an
            unknown base.
        PositionLimitError: from :meth:`positions`, for a sequence longer than L.
    """

    description = "Randomized positions: sorted samples from [0, L), around a base encoding"
    reference = "Ruoss et al. 2023, arXiv:2305.16843"
    per_example_positions = True
    revision = 2  # 2: each example draws its own positions (1: one draw per batch, its rows taking prefixes)

    def __init__(
        self, geometry: Geometry, base: str = "rope", max_position: int | None = None, eval_positions: str = "random", base_params: dict | None = None
    ):
        super().__init__(geometry)
        from pebench.core.registry import ENCODINGS, plugin  # the registry imports plugins: import it late

        if eval_positions not in EVAL_POSITIONS:
            raise ValueError(f"eval_positions must be one of {EVAL_POSITIONS}; got {eval_positions!r}")
        if max_position is not None and max_position < 1:
            raise ValueError(f"max_position (L) must be at least 1; got {max_position}")
        self.max_position, self.eval_positions = max_position or 4 * geometry.max_length, eval_positions
        self.stride = max(1, self.max_position // geometry.max_length)
        self.max_positions = self.max_position
        inner = plugin(ENCODINGS, base)
        if inner.needs_structure:
            raise ValueError(
                f"randomized positions replace the positions of their base, but the base '{base}' ({inner.__name__}) takes its "
                "positions from the task's structural positions; choose another base"
            )
        if not inner.per_example_positions:
            raise ValueError(
                f"randomized positions draw each example's own positions, which the base '{base}' ({inner.__name__}) "
                "cannot take (its per_example_positions is False); choose another base"
            )
        self.inner = inner(dataclasses.replace(geometry, max_length=self.max_position), **(base_params or {}))

    def positions(self, length: int, device=None) -> Tensor:
        """One sequence's positions ``[s]``: a draw from torch's generator (training, or
        ``"random"`` evaluation), or the deterministic ones of ``eval_positions``."""
        self._check(length)
        if self._draws:
            return self._draw(length, None).to(device)
        if self.eval_positions == "stride" and length * self.stride <= self.max_position:
            return torch.arange(length, device=device) * self.stride
        return torch.arange(length, device=device)

    def batch_positions(self, lengths: Tensor, width: int, identity: Tensor, stack: str) -> Tensor:
        """Each example's own sorted draw, ``[b, s]`` (see the module docstring); the shared
        deterministic positions ``[s]`` of ``eval_positions`` otherwise."""
        self._check(width)
        if not self._draws:
            return self.positions(width, lengths.device)
        rows = identity.cpu()
        drawn = torch.zeros(len(rows), width, dtype=torch.long)
        for i, length in enumerate(lengths.tolist()):
            generator = None if self.training else example_generator(rows[i], stack)
            drawn[i, :length] = self._draw(length, generator)
        return drawn.to(lengths.device)

    @property
    def _draws(self) -> bool:
        return self.training or self.eval_positions == "random"

    def _draw(self, length: int, generator: torch.Generator | None) -> Tensor:
        """``length`` distinct positions from [0, L), sorted: ``[length]`` long, on the CPU."""
        return torch.randperm(self.max_position, generator=generator)[:length].sort().values

    def _check(self, length: int) -> None:
        if length > self.max_position:
            raise PositionLimitError(
                f"randomized positions are drawn from [0, {self.max_position}), which cannot hold a sequence of "
                f"{length} tokens; raise max_position (--set encoding.max_position={length})"
            )

    def prepare(self, num_positions: int, device: torch.device) -> None:
        self.inner.prepare(self.max_position, device)  # its positions lie anywhere in [0, L)

    def embed(self, x: Tensor, pos: Tensor, stack: str) -> Tensor:
        return self.inner.embed(x, pos, stack)

    def query_bias(self, pos: Tensor, site: Site) -> Tensor | None:
        return self.inner.query_bias(pos, site)

    def key_value_bias(self, pos: Tensor, site: Site) -> Tensor | None:
        return self.inner.key_value_bias(pos, site)

    def project_query(self, q: Tensor, pos: Tensor, site: Site) -> Tensor:
        return self.inner.project_query(q, pos, site)

    def project_key_value(self, k: Tensor, v: Tensor, pos: Tensor, site: Site) -> tuple[Tensor, Tensor]:
        return self.inner.project_key_value(k, v, pos, site)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, site: Site, causal: bool = False) -> Tensor:
        return self.inner.attend(q, k, v, q_pos, k_pos, allowed, site, causal)

    def plan(self, length: int) -> dict:
        return self.inner.plan(length)


def example_generator(identity: Tensor, stack: str) -> torch.Generator:
    """A CPU generator for one example's evaluation draw, seeded by torch's seed (the evaluation
    seed, :func:`pebench.running.evaluation.seeded`), ``stack`` and the example's tokens ``identity``
    (``[*]`` long, its padding (0) left out): the same example gets the same draw in any batch."""
    digest = hashlib.blake2b(f"{torch.initial_seed()}:{stack}:".encode(), digest_size=8)
    digest.update(identity[identity != 0].to(torch.int64).numpy().tobytes())
    return torch.Generator().manual_seed(int.from_bytes(digest.digest(), "little") >> 1)
