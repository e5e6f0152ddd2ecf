"""Plugin discovery through Python entry points (``importlib.metadata``).

Built-in encodings and tasks are registered in pyproject.toml under the same groups as
third-party plugins (``pebench.encodings``, ``pebench.tasks``), so both are found the same way.
A plugin that fails to import is skipped with a warning that names it; the rest keep working.
"""

from __future__ import annotations

import warnings
from functools import cache
from importlib.metadata import entry_points

ENCODINGS = "pebench.encodings"
TASKS = "pebench.tasks"


class UnknownNameError(LookupError):
    """A name that no card or plugin provides; the message lists the known names."""


@cache
def plugins(group: str) -> dict[str, type]:
    """Every loadable plugin class of an entry-point group, by entry-point name."""
    found = {}
    for entry in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            found[entry.name] = entry.load()
        except Exception as error:  # a broken plugin must not take the others down
            warnings.warn(
                f"pebench: skipping plugin '{entry.name}' ({entry.value}) of group {group}: "
                f"{type(error).__name__}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
    return found


def plugin(group: str, name: str) -> type:
    """The plugin class registered as ``name``.

    Raises:
        UnknownNameError: listing the registered names.
    """
    found = plugins(group)
    if name not in found:
        raise UnknownNameError(f"no plugin '{name}' in entry-point group {group}; registered: {', '.join(found) or 'none'}")
    return found[name]
