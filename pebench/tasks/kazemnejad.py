"""Kazemnejad et al.'s decoder-only suite (issue #39), in progress: its PCFG task's interpreter.

Kazemnejad, Padhi, Natesan Ramamurthy, Das and Reddy 2023, "The Impact of Positional Encoding on
Length Generalization in Transformers" (arXiv:2305.19466, NeurIPS), take their PCFG task from
PCFG SET (Hupkes, Dankers, Mul and Bruni 2020, "Compositionality decomposed: how do neural
networks generalise?", JAIR 67, sec. 3.2): a source is a composition of string-edit functions
applied to strings of symbols, written in prefix order with ``,`` between the two arguments of a
binary function; the target is its value.

The ten functions (Hupkes et al. 2020, table 1):
- unary: ``copy`` (x), ``reverse`` (x backwards), ``shift`` (x's first symbol moved to the end),
  ``echo`` (x and its last symbol again), ``swap_first_last`` (x with its first and last symbols
  exchanged), ``repeat`` (x twice);
- binary: ``append`` (x then y), ``prepend`` (y then x), ``remove_first`` (y),
  ``remove_second`` (x).

:func:`interpret` is checked against every pair of PCFG SET's dev and test sets and its
productivity test set (``../shared/data/pcfgset``; tests/test_kazemnejad.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Symbols = tuple[str, ...]

UNARY: dict[str, Callable[[Symbols], Symbols]] = {
    "copy": lambda x: x,
    "reverse": lambda x: x[::-1],
    "shift": lambda x: x[1:] + x[:1],
    "echo": lambda x: x + x[-1:],
    "swap_first_last": lambda x: x if len(x) < 2 else x[-1:] + x[1:-1] + x[:1],
    "repeat": lambda x: x + x,
}
BINARY: dict[str, Callable[[Symbols, Symbols], Symbols]] = {
    "append": lambda x, y: x + y,
    "prepend": lambda x, y: y + x,
    "remove_first": lambda x, y: y,
    "remove_second": lambda x, y: x,
}
SEPARATOR = ","


def interpret(source: Sequence[str]) -> Symbols:
    """The value of a PCFG SET source (its tokens): the composition of string functions it
    writes, applied as it says.

    Raises:
        ValueError: for a source that is not one whole expression (a binary function without its
            separator or second argument, an empty string argument, tokens left over).
    """
    value, end = _expression(tuple(source), 0)
    if end != len(source):
        raise ValueError(f"tokens left after a whole PCFG SET expression, at {end}: {' '.join(source[end:])!r}")
    return value


def _expression(tokens: Symbols, start: int) -> tuple[Symbols, int]:
    """The value of the expression that starts at ``start``, and where it ends."""
    if start >= len(tokens):
        raise ValueError("a PCFG SET expression ends where an argument was expected")
    head = tokens[start]
    if head in UNARY:
        value, end = _expression(tokens, start + 1)
        return UNARY[head](value), end
    if head in BINARY:
        first, end = _expression(tokens, start + 1)
        if end >= len(tokens) or tokens[end] != SEPARATOR:
            raise ValueError(f"the binary function {head!r} at {start} has no ',' before its second argument")
        second, end = _expression(tokens, end + 1)
        return BINARY[head](first, second), end
    end = start
    while end < len(tokens) and tokens[end] != SEPARATOR and tokens[end] not in UNARY and tokens[end] not in BINARY:
        end += 1
    if end == start:
        raise ValueError(f"an empty string argument at {start} of a PCFG SET expression")
    return tokens[start:end], end
