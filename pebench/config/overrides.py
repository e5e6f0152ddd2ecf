"""``--set`` overrides: ``SECTION.KEY=VALUE`` applied to a task card and an encoding card, and
the settings in which the result differs from the cards.

A value is a TOML literal (``3``, ``0.1``, ``true``, ``[1, 8]``, ``"rope"``), else a number
Python reads, else the text itself. The keys a task card may set come from the protocol
(:data:`pebench.config.protocol.SECTION_KEYS`) and are passed in, so that this module imports no
model and the report (:mod:`pebench.analysis.frames`), which reads overrides and changed
settings of records, stays free of torch.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def parse_value(raw: str):
    """A ``--set`` value: a TOML literal (``3``, ``0.1``, ``true``, ``[1, 8]``, ``"rope"``), else a
    number Python reads (``07``, which TOML refuses for its leading zero), else the text itself."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        pass
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            continue
    return raw


def apply_overrides(task: dict, encoding: dict, overrides: list[str], section_keys: dict[str, tuple[str, ...]]) -> None:
    """Apply ``key=value`` overrides in place. ``encoding.NAME=V`` sets an encoding param;
    ``SECTION.NAME=V`` sets a field of the task card (e.g. ``training.steps=200``).
    Values are :func:`parse_value`'s.

    A key may be one the card sets or any of ``section_keys`` (every key a task card may set, by
    section: :data:`pebench.config.protocol.SECTION_KEYS`), e.g. ``training.target`` on a card
    that sets none, ``decoding.beam_size``.

    Raises:
        ValueError: for a malformed override or an unknown task-card key (listing the known keys).
    """
    for override in overrides:
        key, sep, raw = override.partition("=")
        path = key.strip().split(".")
        if not sep or len(path) != 2 or not all(path):
            raise ValueError(f"--set expects SECTION.KEY=VALUE (e.g. training.steps=200 or encoding.delta=0.05); got {override!r}")
        section, field = path
        value = parse_value(raw.strip())
        if section == "encoding":
            encoding["params"][field] = value
            continue
        card_keys = task.get(section) if isinstance(task.get(section), dict) else {}
        if field not in card_keys and field not in section_keys.get(section, ()):
            known = sorted(
                {f"{s}.{k}" for s, body in task.items() if isinstance(body, dict) for k in body}
                | {f"{s}.{k}" for s, keys in section_keys.items() for k in keys}
            )
            raise ValueError(f"task card '{task['name']}' has no key {key!r}; known keys: {', '.join(known)}, or encoding.<param>")
        task.setdefault(section, {})[field] = value


def changed_settings(task: dict, encoding: dict, card_task: dict, card_encoding: dict) -> dict:
    """The resolved settings that differ from the cards, as ``{"section.key": value}`` (encoding
    parameters as ``encoding.NAME``), sorted: what makes a run another configuration than the
    cards' own, however the overrides were spelled (``training.steps=07``, a key set twice, a
    card's own default)."""
    changed = {f"encoding.{name}": value for name, value in encoding["params"].items() if card_encoding["params"].get(name, _MISSING) != value}
    for section, body in task.items():
        if isinstance(body, dict):
            changed.update({f"{section}.{key}": value for key, value in body.items() if card_task.get(section, {}).get(key, _MISSING) != value})
    return dict(sorted(changed.items()))


_MISSING = object()
