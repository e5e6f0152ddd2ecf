"""Card values against the types their settings are annotated with, checked before anything
is built (task card sections, encoding parameters)."""

from __future__ import annotations

import types
import typing


def check_type(key: str, value, hint) -> None:
    """Raise ValueError naming ``key`` unless ``value`` has the annotated type ``hint``: ``int``
    (not a bool), ``float`` (an int or a float, not a bool), ``bool``, ``str``, ``list``,
    ``dict``, or a union of them (``float | None``). An annotation of another kind is not
    checked."""
    allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = [typing.get_origin(kind) or kind for kind in allowed]
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
