"""Synthetic sequence-transduction tasks generated from a seeded RNG.

Each task draws a length L uniformly from the requested range and then a random input of that
length; the output is a deterministic function of the input:
- ``copy``: the input itself.
- ``reverse``: the input reversed.
- ``sort``: the input symbols in ascending order.
- ``addition``: the decimal sum of two numbers. L is the digit count of the longer operand (the
  other has 1..L digits); operands and sum are written least-significant digit first, so that a
  left-to-right decoder can carry (Lee et al. 2023, arXiv:2307.03381, reverse only the output;
  reversing the operands too keeps aligned digits at equal offsets).
These follow the length-generalisation suites of Delétang et al. 2023 (arXiv:2207.02098) and
Kazemnejad et al. 2023 (arXiv:2305.19466).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from pebench.tasks.base import Example, LengthBucket, Task


class SyntheticTask(Task):
    """A task that can sample an example of any given length.

    Raises:
        ValueError: from the generators, if a bucket has no upper bound.
    """

    def sample(self, rng: random.Random, length: int) -> Example:
        raise NotImplementedError

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        while True:
            yield self.sample(rng, rng.randint(lengths.lo, _finite(lengths).hi))

    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """``n`` examples spread evenly over the bucket's lengths (lo, lo + step, ..., hi, lo, ...),
        so that every length holds n / (number of lengths) of them, give or take one: scores per
        length rest on equal counts."""
        lengths = _finite(bucket).lengths
        return [self.sample(rng, lengths[i % len(lengths)]) for i in range(n)]


def _finite(bucket: LengthBucket) -> LengthBucket:
    if bucket.hi is None:
        raise ValueError(f"synthetic tasks need bounded length buckets; got '{bucket.label}'")
    return bucket


class SymbolTask(SyntheticTask):
    """Output = a function of a uniform random symbol string of length L.

    Args:
        alphabet_size: number of distinct input symbols.
    """

    def __init__(self, alphabet_size: int = 16):
        self.symbols = [chr(ord("a") + i) if i < 26 else f"s{i}" for i in range(alphabet_size)]

    def sample(self, rng: random.Random, length: int) -> Example:
        source = tuple(rng.randrange(len(self.symbols)) for _ in range(length))
        return Example(source, self.transform(source), length)

    def transform(self, source: tuple[int, ...]) -> tuple[int, ...]:
        raise NotImplementedError


class Copy(SymbolTask):
    description = "Copy a random symbol sequence"
    reference = "Delétang et al. 2023, arXiv:2207.02098"

    def transform(self, source):
        return source


class Reverse(SymbolTask):
    description = "Reverse a random symbol sequence"
    reference = "Delétang et al. 2023, arXiv:2207.02098"

    def transform(self, source):
        return source[::-1]


class Sort(SymbolTask):
    description = "Sort a random symbol sequence"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"

    def transform(self, source):
        return tuple(sorted(source))


class Addition(SyntheticTask):
    """Multi-digit decimal addition, least-significant digit first."""

    description = "Add two decimal numbers, digits least-significant first"
    reference = "Lee et al. 2023, arXiv:2307.03381"

    def __init__(self):
        self.symbols = [str(d) for d in range(10)] + ["+"]

    def longest_tokens(self, length: int) -> tuple[int, int]:
        return 2 * length + 1, length + 1  # a + b with both of `length` digits; a carry adds one

    def sample(self, rng: random.Random, length: int) -> Example:
        a, b = number(rng, length), number(rng, rng.randint(1, length))
        if rng.random() < 0.5:
            a, b = b, a
        plus = self.symbols.index("+")
        source = digits(a) + (plus,) + digits(b)
        return Example(source, digits(a + b), length)


def number(rng: random.Random, count: int) -> int:
    """A uniform number with exactly ``count`` decimal digits (0 allowed for one digit)."""
    return rng.randint(0 if count == 1 else 10 ** (count - 1), 10**count - 1)


def digits(value: int) -> tuple[int, ...]:
    """Decimal digits, least significant first."""
    return tuple(int(c) for c in reversed(str(value)))
