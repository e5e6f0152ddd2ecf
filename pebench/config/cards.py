"""Cards: named TOML configurations of encodings (``encodings/*.toml``), tasks (``tasks/*.toml``)
and suites (``suites/*.toml``), and their discovery (``--set`` overrides of them:
:mod:`pebench.config.overrides`).

An encoding card names a plugin and its params::

    description = "..."; reference = "..."; plugin = "flow"
    [params]
    delta = 0.1

A plugin installed without a card of its own gets a default card (its class's description and
reference, no params), so ``pebench run --encoding <entry-point name>`` works for any plugin.
A task card names a task family and fixes the protocol; see ``tasks/copy.toml``.

Cards ship inside the wheel under ``pebench/_cards``; in a source checkout they are read from
the repository's top-level ``encodings/`` and ``tasks/`` folders.
"""

from __future__ import annotations

import copy
import inspect
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from pathlib import Path

from pebench.core.registry import ENCODINGS, UnknownNameError, plugins

PACKAGE = Path(__file__).resolve().parents[1]


def card_dir(kind: str) -> Path:
    """Where the built-in cards of ``kind`` ("encodings", "tasks" or "suites") live."""
    packaged = PACKAGE / "_cards" / kind
    return packaged if packaged.is_dir() else PACKAGE.parent / kind


def _card_files(kind: str) -> dict[str, Path]:
    return {path.stem: path for path in sorted(card_dir(kind).glob("*.toml"))}


def encoding_cards() -> dict[str, dict]:
    """Every encoding card by name: the built-in card files, then a default card for each
    installed plugin that has no card file of its name. Cards of plugins that failed to load
    are left out."""
    loaded = plugins(ENCODINGS)
    cards = {name: _read(path, name) for name, path in _card_files("encodings").items()}
    cards = {name: card for name, card in cards.items() if card["plugin"] in loaded}
    for name, cls in loaded.items():
        cards.setdefault(name, {"name": name, "plugin": name, "description": cls.description, "reference": cls.reference, "params": {}})
    return dict(sorted(cards.items()))


def task_cards() -> dict[str, dict]:
    """Every task card by name."""
    return {name: _read(path, name) for name, path in _card_files("tasks").items()}


def suite_cards() -> dict[str, dict]:
    """Every suite card by name (``suites/*.toml``): a suite lists its tasks, in its order,
    either flat (``tasks = [...]``) or by level (``[levels]``: the Chomsky hierarchy's)."""
    cards = {}
    for name, path in _card_files("suites").items():
        with path.open("rb") as file:
            cards[name] = {"name": name, **tomllib.load(file)}
    return cards


def suite_levels(name: str) -> dict[str, tuple[str, ...]]:
    """The suite's tasks by level, in order ({"": tasks} for a suite without levels).

    Raises:
        UnknownNameError: listing the known suites.
    """
    card = _lookup(suite_cards(), name, "suite")
    levels = card.get("levels", {"": card.get("tasks", [])})
    return {level: tuple(tasks) for level, tasks in levels.items()}


def suite_tasks(name: str) -> tuple[str, ...]:
    """The suite's tasks, in its order (:func:`suite_levels` one after another)."""
    return tuple(task for tasks in suite_levels(name).values() for task in tasks)


def suite_of(task: str) -> str:
    """The name of the suite that lists ``task`` ("" when none does)."""
    return next((name for name in suite_cards() if task in suite_tasks(name)), "")


def encoding_card(name: str) -> dict:
    """The encoding card ``name``. Raises UnknownNameError listing the known encodings."""
    return _lookup(encoding_cards(), name, "encoding")


def task_card(name: str) -> dict:
    """The task card ``name``. Raises UnknownNameError listing the known tasks."""
    return _lookup(task_cards(), name, "task")


def _lookup(cards: dict[str, dict], name: str, kind: str) -> dict:
    if name not in cards:
        raise UnknownNameError(f"unknown {kind} '{name}'; known {kind}s: {', '.join(cards)} (see `pebench list`)")
    return copy.deepcopy(cards[name])


def _read(path: Path, name: str) -> dict:
    with path.open("rb") as file:
        card = tomllib.load(file)
    card["name"] = name
    card.setdefault("plugin", name)
    card.setdefault("params", {})
    return card


def with_plugin_defaults(encoding: dict) -> dict:
    """``encoding`` with its ``params`` completed by the plugin constructor's defaults (the card's
    values win), so that a record holds every parameter the encoding ran with, and a parameter
    set to its default is no other configuration than leaving it out."""
    cls = plugins(ENCODINGS)[encoding["plugin"]]
    defaults = {
        name: p.default
        for name, p in inspect.signature(cls).parameters.items()
        if name != "geometry" and p.default is not inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    return {**encoding, "params": {**defaults, **encoding["params"]}}
