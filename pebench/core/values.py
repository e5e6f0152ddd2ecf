"""Checks of card values, made before anything is built (task card sections, encoding
parameters): their annotated types, their ranges, their parity. Each takes the setting's name
first, then its value, and raises ValueError naming both."""

from __future__ import annotations

import operator
import types
import typing


def check_type(key: str, value, hint) -> None:
    """Raise ValueError naming ``key`` unless ``value`` has the annotated type ``hint``: ``int``
    (not a bool), ``float`` (an int or a float, not a bool), ``bool``, ``str``, ``list``,
    ``dict``, or a union of them (``float | None``); a ``str``-valued Enum (``Architecture``) is
    checked as ``str``. An annotation of another kind is not checked."""
    allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = [str if isinstance(kind, type) and issubclass(kind, str) else typing.get_origin(kind) or kind for kind in allowed]
    if not all(kind in CHECKED_TYPES for kind in kinds):
        return
    if not any(_is_of(value, kind) for kind in kinds):
        names = " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
        raise ValueError(f"{key} must be of type {names}; got {value!r}")


CHECKED_TYPES = (int, float, bool, str, list, dict, type(None))


def _is_of(value, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


def check_range(key: str, value, *, at_least=None, above=None, below=None, kind: str = "a number") -> None:
    """Raise ValueError naming ``key`` and every bound given (``"training.steps must be an integer
    >= 1; got 0"``; ``kind``: "a number" or "an integer") unless ``value`` meets them all
    (:func:`broken_bounds`)."""
    limits = broken_bounds(value, at_least=at_least, above=above, below=below)
    if limits:
        raise ValueError(f"{key} must be {kind} {limits}; got {value!r}")


def broken_bounds(value, *, at_least=None, above=None, below=None) -> str:
    """Every bound given, as text (``">= 0 and < 1"``), when ``value`` breaks one of them: is not
    at least ``at_least``, above ``above`` and below ``below`` (a NaN meets none); "" when it
    meets them all."""
    given = [(sign, meets, bound) for (sign, meets), bound in zip(COMPARISONS, (at_least, above, below)) if bound is not None]
    if all(meets(value, bound) for _, meets, bound in given):
        return ""
    return " and ".join(f"{sign} {bound}" for sign, _, bound in given)


COMPARISONS = ((">=", operator.ge), (">", operator.gt), ("<", operator.lt))  # at_least, above, below


def check_even(key: str, value: int, reason: str) -> None:
    """Raise ValueError ``"{reason}, so {key} must be even; got {value}"`` unless ``value`` is
    even (``reason``: what pairs the features, e.g. "RoPE pairs features two by two")."""
    if value % 2:
        raise ValueError(f"{reason}, so {key} must be even; got {value}")
