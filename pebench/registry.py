"""Plugin discovery through Python entry points (``importlib.metadata``).

Built-in encodings and tasks are registered in pyproject.toml under the same groups as
third-party plugins (``pebench.encodings``, ``pebench.tasks``), so both are found the same way.
A plugin that fails to import is skipped with a warning that names it; the rest keep working.
"""

from __future__ import annotations

import warnings
from functools import cache
from importlib.metadata import EntryPoint, entry_points

ENCODINGS = "pebench.encodings"
TASKS = "pebench.tasks"


class UnknownNameError(LookupError):
    """A name that no card or plugin provides; the message lists the known names."""


class PluginConflictError(RuntimeError):
    """Two installed packages register one plugin name; the message names both."""


@cache
def _entries(group: str) -> dict[str, EntryPoint]:
    """Every entry point of ``group`` by name.

    Raises:
        PluginConflictError: if two distributions (or two targets) register one name: which of
            them would load would depend on the order packages were installed.
    """
    entries: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=group), key=lambda e: e.name):
        known = entries.get(entry.name)
        if known is not None and (_distribution(known), known.value) != (_distribution(entry), entry.value):
            raise PluginConflictError(
                f"two installed packages register the plugin '{entry.name}' in {group}: {_distribution(known)} ({known.value}) "
                f"and {_distribution(entry)} ({entry.value}); uninstall one, or rename its entry point")
        entries[entry.name] = entry
    return entries


def _distribution(entry: EntryPoint) -> str:
    return entry.dist.name if entry.dist is not None else "an unknown package"


def origin(group: str, name: str) -> dict:
    """The distribution that registers plugin ``name``, and its version (for run records)."""
    entry = _entries(group)[name]
    return {"distribution": _distribution(entry), "version": entry.dist.version if entry.dist is not None else None}


@cache
def plugins(group: str) -> dict[str, type]:
    """Every loadable plugin class of an entry-point group, by entry-point name.

    Raises:
        PluginConflictError: from :func:`_entries`, for a name two packages register.
    """
    found = {}
    for name, entry in _entries(group).items():
        try:
            found[name] = entry.load()
        except Exception as error:  # a broken plugin must not take the others down
            warnings.warn(
                f"pebench: skipping plugin '{name}' ({entry.value}) of group {group}: "
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
