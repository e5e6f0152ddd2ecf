"""Multi-digit addition as the arithmetic length-generalisation papers measure it.

McLeish et al. 2024 (arXiv:2405.17399; github.com/mcleish7/arithmetic, ``create_data_split.py
--bucket --reverse_all --p 0.0``) train on a + b with each operand's digit count drawn uniformly
from 1 to L on its own, both operands and the sum written least-significant digit first, without
zero padding, the loss on the answer only; they score exact match on a grid of operand lengths
(len a x len b, 100 examples a cell) far past L. This family follows that format:

- source ``a + b`` (digits least-significant first), target the sum, least-significant first;
- ``length`` = the longer operand's digit count; ``cell`` = (digits of a, digits of b);
- structural positions (:mod:`pebench.tasks.base`): each digit's significance in its number
  (1 for the units), 0 for ``+``; the answer's k-th digit has significance k by the contract's
  output rule, which is exact for an answer written least-significant first.
- training: both operand lengths uniform in the training range, on their own;
- evaluation at length n: half the examples on the grid's diagonal (both operands n digits: the
  per-length curve and the extrapolation length of :mod:`pebench.analysis.leaderboards` read these through
  the cells), the other half spread over the other cells (i, j) of the grid with max(i, j) = n,
  i and j among the card's ``grid`` lengths (:meth:`LongAddition.at_length`).

Where it differs from McLeish et al.: pebench's model is a small pre-LN decoder trained for the
card's budget (theirs: 16 layers, a GPU-day), L = 10 instead of 20, and a coarser grid with
fewer examples per cell.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from pebench.tasks.base import Example, LengthBucket, Task
from pebench.tasks.synthetic import digits, number


class TwoOperands(Task):
    """An addition task whose training and validation examples draw each operand's digit count
    uniformly from the training lengths on its own (McLeish et al.'s and Kazemnejad et al.'s
    builders both do); subclasses make the example of two digit counts (:meth:`example`)."""

    def example(self, rng: random.Random, digits_a: int, digits_b: int) -> Example:
        raise NotImplementedError

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        while True:
            yield self.example(rng, rng.randint(lengths.lo, lengths.hi), rng.randint(lengths.lo, lengths.hi))

    def validation_examples(self, rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
        """Fresh draws as in training (both operand lengths uniform on their own)."""
        stream = self.training_examples(rng, lengths)
        return [next(stream) for _ in range(n)]


class LongAddition(TwoOperands):
    """a + b, all numbers least-significant digit first, no padding; structural positions.

    Args:
        grid: the operand lengths (digits) of the evaluation grid, ascending; every evaluation
            length must be one of them.
    Raises:
        ValueError: for an empty or unsorted grid, or an evaluation length not in it.
    """

    description = "Add two numbers of 1-L digits each (reversed, unpadded), scored on a grid of operand lengths"
    reference = "McLeish et al. 2024, arXiv:2405.17399; Cho et al. 2024, arXiv:2405.20671"
    structural = True

    def __init__(self, grid: list[int] | None = None):
        self.symbols = [str(d) for d in range(10)] + ["+"]
        self.grid = list(grid or range(1, 11))
        if not self.grid or self.grid != sorted(set(self.grid)) or self.grid[0] < 1:
            raise ValueError(f"long_addition's grid must be ascending distinct digit counts >= 1; got {grid}")

    def longest_tokens(self, length: int) -> tuple[int, int]:
        return 2 * length + 1, length + 1  # both operands of `length` digits; a carry adds one

    def example(self, rng: random.Random, digits_a: int, digits_b: int) -> Example:
        """A uniform a with ``digits_a`` digits and b with ``digits_b`` (0 allowed for one digit)."""
        a, b = number(rng, digits_a), number(rng, digits_b)
        source = digits(a) + (self.symbols.index("+"),) + digits(b)
        structure = significance(digits_a) + (0,) + significance(digits_b)
        return Example(source, digits(a + b), max(digits_a, digits_b), structure=structure, cell=(digits_a, digits_b))

    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """``n`` examples spread evenly over the bucket's lengths; at each length half on the
        diagonal, half over the other cells of the grid (module docstring)."""
        lengths = bucket.lengths
        per_length = [n // len(lengths) + (i < n % len(lengths)) for i in range(len(lengths))]
        return [e for length, count in zip(lengths, per_length) for e in self.at_length(rng, length, count)]

    def at_length(self, rng: random.Random, length: int, count: int) -> list[Example]:
        """``count`` examples whose longer operand has ``length`` digits: half (rounded up) on the
        diagonal, the rest cycling through the other cells in the order (i, length) for each grid
        length i below it, then (length, j) likewise, so that where they do not divide evenly the
        (i, length) cells get one more (module docstring)."""
        if length not in self.grid:
            raise ValueError(f"long_addition evaluates on its grid {self.grid}; length {length} is not in it: add it to params.grid")
        others = [(i, length) for i in self.grid if i < length] + [(length, j) for j in self.grid if j < length]
        cells = [(length, length)] * (count - count // 2 if others else count)
        cells += [others[i % len(others)] for i in range(count - len(cells))] if others else []
        return [self.example(rng, a, b) for a, b in cells]


def significance(count: int) -> tuple[int, ...]:
    """The significance of each digit of a ``count``-digit number written least-significant
    first: 1 (units), 2 (tens), ..."""
    return tuple(range(1, count + 1))
