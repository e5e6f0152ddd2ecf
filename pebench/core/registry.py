"""Plugin discovery through Python entry points (``importlib.metadata``).

Built-in encodings and tasks are registered in pyproject.toml under the same groups as
third-party plugins (``pebench.encodings``, ``pebench.tasks``), so both are found the same way.
A plugin that fails to import is skipped with a warning that names it; the rest keep working.
:func:`build_encoding` builds an encoding card's plugin, its parameters checked first.
"""

from __future__ import annotations

import hashlib
import inspect
import traceback
import typing
import warnings
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from pebench.core.values import check_type

if typing.TYPE_CHECKING:
    from pebench.encodings.base import Geometry, PositionalEncoding

ENCODINGS = "pebench.encodings"
TASKS = "pebench.tasks"


class PluginBuildError(ValueError):
    """A plugin's constructor raised something other than the ValueError or TypeError of a bad
    parameter: a bug of the plugin, named with where it was raised."""


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
                f"and {_distribution(entry)} ({entry.value}); uninstall one, or rename its entry point"
            )
        entries[entry.name] = entry
    return entries


def _distribution(entry: EntryPoint) -> str:
    return entry.dist.name if entry.dist is not None else "an unknown package"


OWN_DISTRIBUTION = "pebench"


@cache
def source_hash(cls: type) -> str | None:
    """The first 16 hex digits of the SHA-256 of the source file of the module that defines
    ``cls`` (None where it has none: a class built in a notebook or from C); read once per
    process, as the module itself was."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path else None


def origin(group: str, name: str) -> dict:
    """What a run record keeps of the code of plugin ``name``: the distribution that registers
    it, its version, and the hash of its module's source (:func:`source_hash`)."""
    entry = _entries(group)[name]
    version = entry.dist.version if entry.dist is not None else None
    return {"distribution": _distribution(entry), "version": version, "source": source_hash(plugin(group, name))}


def code_key(code: dict | None) -> tuple:
    """What identifies a plugin's code (``code``: an :func:`origin` with ``revision``; None, or
    without these fields, in older records: pebench's, revision 1). pebench's own plugins are
    kept by their ``revision`` (raised with a change of what they compute, so that an edit of
    wording or layout leaves the committed grid current); any other distribution's by its
    revision, version and source hash, so that an edit or a version bump tells its records
    apart."""
    code = code or {}
    distribution, revision = code.get("distribution", OWN_DISTRIBUTION), code.get("revision", 1)
    return (distribution, revision) if distribution == OWN_DISTRIBUTION else (distribution, revision, code.get("version"), code.get("source"))


def same_code(recorded: dict | None, current: dict) -> bool:
    """Whether a record's plugin code is the ``current`` one (:func:`code_key`)."""
    return code_key(recorded) == code_key(current)


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
                f"pebench: skipping plugin '{name}' ({entry.value}) of group {group}: {type(error).__name__}: {error}",
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


def build_encoding(encoding_card: dict, geometry: Geometry) -> PositionalEncoding:
    """The card's encoding plugin built for ``geometry`` with the card's params.

    Raises:
        ValueError: for a param the plugin does not take, or a value it refuses (both list the
            plugin's parameters).
        TypeError: for a value of the wrong type (listing them too).
        PluginBuildError: when the plugin's constructor raises anything else (its own bug).
    """
    cls = plugin(ENCODINGS, encoding_card["plugin"])
    signature = inspect.signature(cls)
    accepted = [name for name in signature.parameters if name != "geometry"]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    unknown = sorted(set(encoding_card["params"]) - set(accepted))
    named = f"encoding '{encoding_card.get('name', encoding_card['plugin'])}' ({cls.__name__})"
    described = f"{named}; its parameters: {', '.join(accepted) or 'none'}"
    if unknown and not takes_any:
        raise ValueError(f"no parameter {', '.join(map(repr, unknown))} in {described}")
    hints = _annotations(cls)
    for name, value in encoding_card["params"].items():
        if name in hints:
            check_type(f"encoding.{name}", value, hints[name])
    try:
        return cls(geometry, **encoding_card["params"])
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} (in {described}; set with --set encoding.NAME=VALUE)") from error
    except Exception as error:  # the plugin's own bug: named, with where it was raised, not a bare traceback
        frame = traceback.extract_tb(error.__traceback__)[-1]
        raise PluginBuildError(
            f"{named} failed to build: {type(error).__name__}: {error} (raised at {Path(frame.filename).name}:{frame.lineno}, in {frame.name})"
        ) from error


def _annotations(cls: type) -> dict:
    """The constructor's parameter annotations, resolved ({} when they cannot be: the types of
    such a plugin's parameters are then not checked)."""
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # a plugin's annotation naming something its module does not import
        return {}
