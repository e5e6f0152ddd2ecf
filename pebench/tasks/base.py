"""The task contract: examples, length buckets, and what a task family provides.

A task family is a :class:`Task` subclass (examples) or a :class:`TokenStream` subclass (a text
for language modelling) registered under the entry-point group ``pebench.tasks``; a task card (``tasks/*.toml``) names the family and fixes the protocol
(length split, buckets, metrics, model, budget), which :mod:`pebench.config.protocol` enforces.
A family only produces examples: ``source`` and ``target`` are sequences of symbol ids
(indices into :attr:`Task.symbols`), and ``length`` is the example's length in the task's unit
(digits, symbols, subword tokens), which decides its bucket.

*Structural positions* are positions that only the task knows (McLeish et al. 2024,
arXiv:2405.17399; Cho et al. 2024, arXiv:2405.20671): a task whose examples carry them sets
``structural = True`` and gives each example's ``structure``, one non-negative integer per source
symbol (for addition: a digit's significance in its number, 1 for the units; 0 for a symbol that
is not a digit). An output has one rule, the same for every such task: its k-th token (k = 1,
2, ...) has structural position k, as the digits of an answer written least-significant first
have; the model's own tokens (BOS, SEP, EOS, padding) have 0. Encodings that need them
(:attr:`pebench.PositionalEncoding.needs_structure`) are refused on a task without them, before
training.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Example:
    """One input/output pair, as symbol ids, with its length in the task's unit; for tasks
    scored on text (BLEU, chrF) the raw reference translation; the number of output slots an
    encoder-only model gets (``output_slots``; default: one per target symbol, and one more for the
    end token of a task that has one); for a task with structural positions, ``structure`` (one
    per source symbol, see the module docstring); and ``cell``, the example's place in a grid of
    two lengths (the digits of each operand) where the task evaluates on one."""

    source: tuple[int, ...]
    target: tuple[int, ...]
    length: int
    reference: str = ""
    output_slots: int | None = None
    structure: tuple[int, ...] | None = None
    cell: tuple[int, int] | None = None

    @property
    def slots(self) -> int:
        """Output slots in the encoder-only format: ``output_slots``, else one per target symbol."""
        return len(self.target) if self.output_slots is None else self.output_slots


@dataclass(frozen=True)
class LengthBucket:
    """Lengths lo..hi inclusive, every ``step``-th from lo (a spread of long lengths, as
    Delétang et al. evaluate); ``hi=None`` means unbounded."""

    lo: int
    hi: int | None
    step: int = 1

    def __contains__(self, length: int) -> bool:
        return self.lo <= length and (self.hi is None or length <= self.hi) and (length - self.lo) % self.step == 0

    @property
    def label(self) -> str:
        span = f"{self.lo}+" if self.hi is None else f"{self.lo}-{self.hi}" if self.hi != self.lo else f"{self.lo}"
        return span if self.step == 1 else f"{span} by {self.step}"

    @property
    def lengths(self) -> range:
        """The lengths of a bounded bucket.

        Raises:
            ValueError: if the bucket has no upper bound.
        """
        if self.hi is None:
            raise ValueError(f"the lengths of bucket '{self.label}' have no end: give it an upper bound")
        return range(self.lo, self.hi + 1, self.step)


class TaskFamily(ABC):
    """What every task family has. A family is one of two kinds: a :class:`Task` makes examples
    (input/output pairs, scored per example or as text); a :class:`TokenStream` is a text for
    language modelling, scored by perplexity at each evaluation length. Which scorer scores it
    follows from its kind and its card's metrics (:mod:`pebench.config.kinds`).

    Subclasses set ``description`` and ``reference``, take their card's ``[params]`` as keyword
    arguments, and fill :attr:`symbols`. A family that reads a local data folder also takes the
    keyword argument ``data_dir`` (a ``Path``, or None: ``$PEBENCH_DATA``, else the hub; read
    through :func:`pebench.tasks.data.data_root`): the run's ``--data-dir``, which
    :func:`pebench.config.protocol.resolve` passes to the families whose constructor has it.
    """

    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    structural: ClassVar[bool] = False  # its examples carry structural positions (module docstring)
    symbols: list[str]
    data: dict = {}  # provenance of real data (origin, pair counts), stored in the run record; read-only here


class TokenStream(TaskFamily):
    """A token stream for language modelling with a length split (Press et al. 2022, "Train
    Short, Test Long", arXiv:2108.12409): windows of the training length drawn from
    :attr:`train_ids`; the ID validation text :attr:`validation_ids` scored at the training
    length; :attr:`evaluation_ids` scored at every evaluation length, with :attr:`stride` tokens
    scored per window in the sliding-window evaluation (:mod:`pebench.running.perplexity`). Token ids are
    indices into :attr:`symbols`."""

    train_ids: list[int]
    validation_ids: list[int]
    evaluation_ids: list[int]
    stride: int

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        """Windows of ``lengths.hi`` + 1 tokens at uniform offsets of the training text: the model
        reads the first ``lengths.hi`` and predicts each next one (``target`` is empty).

        Raises:
            ValueError: if the training text is shorter than a window.
        """
        width = lengths.hi + 1
        if len(self.train_ids) < width:
            raise ValueError(f"the training text has {len(self.train_ids)} tokens, fewer than a window of {width}")
        while True:
            start = rng.randrange(len(self.train_ids) - width + 1)
            yield Example(tuple(self.train_ids[start : start + width]), (), lengths.hi)


class Task(TaskFamily):
    """Base class of the task families that make examples (see :class:`TaskFamily`)."""

    @abstractmethod
    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        """An endless stream of training examples whose length lies in ``lengths``."""

    @abstractmethod
    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """``n`` evaluation examples with lengths in ``bucket``, drawn from ``rng`` only."""

    def validation_examples(self, rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
        """``n`` ID validation examples with lengths in ``lengths`` (the training lengths), drawn
        from ``rng`` only; never the evaluation set's examples, except by chance. Default: fresh
        draws, as :meth:`evaluation_examples` makes (generated tasks); a real-data task takes
        them from its development set."""
        return self.evaluation_examples(rng, lengths, n)

    def longest_tokens(self, length: int) -> tuple[int, int]:
        """The most (source, target) symbols an example of ``length`` can have; the protocol
        derives the longest training sequence from it. Default: both equal the length."""
        return length, length

    def detokenize(self, symbol_ids) -> str:
        """The text that text metrics (BLEU, chrF) score; tasks scored on text override it."""
        raise NotImplementedError(f"task {type(self).__name__} is not scored on text")


def held_examples(examples: list[Example], rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
    """The examples of a fixed set (real data) with a length in ``lengths``: all when ``n`` is 0
    (or not fewer than there are), else ``n`` of them drawn with ``rng``, in their order."""
    inside = [e for e in examples if e.length in lengths]
    if n and n < len(inside):
        inside = [inside[i] for i in sorted(rng.sample(range(len(inside)), n))]
    return inside
