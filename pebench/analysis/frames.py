"""Run records as tables (pandas), the shape the report and users work with.

:func:`frames` turns records into seven frames, keyed by ``run`` (``task/encoding/seed<k>``, with
``@<hash>`` for a configuration of other settings):
- ``runs``: one row per successful run: its table (task and task settings), protocol, encoding
  row label, seed, whether it reached the ID target (``learned``; None where the protocol has no
  target), steps, training wall time, the run's whole wall time (``run_seconds``: data,
  training and evaluation, from the record's ``stages``; NaN without them), final loss, and
  what the report needs of its card;
- ``scores``: one row per (run, where, metric): ``where`` is ``ID``, ``OOD`` or a bucket label;
- ``lengths``: one row per (run, length, metric), protocol 2 only;
- ``positions``: language models' mean loss by position in the window, per (run, length);
- ``curves``: the training curve of each run (step, mean training loss, validation score of the
  primary metric);
- ``capped``: per (run, bucket), the outputs that stopped at the decoding cap without EOS, where
  there were any;
- ``cells``: for a task that scores a grid of two lengths (the digits of each operand), one row
  per (run, a, b, metric), ``n`` the cell's examples.

Labels: a record whose settings differ from the cards (:func:`pebench.config.overrides.changed_settings`;
for a protocol 2 record, also from the card of its task's newest run, so that a record of an
earlier card, stale to ``pebench sweep``, stays apart from the current card's runs) is labelled
``name@<hash>``, its task part naming the table (``copy@1a2b3c4d``: other buckets, steps, ...)
and its encoding part the row (``rope@5e6f7a8b``), so that no configuration blanks
or joins another; :func:`legend` says what each hash stands for. Protocol 1 records (schema 1)
become rows of their own tables, with ``learned`` None and the OOD score that protocol used
(the mean of the OOD buckets' scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pebench.config.overrides import changed_settings, parse_value
from pebench.core.registry import code_key
from pebench.records.paths import USER_RESULTS, settings_hash
from pebench.records.store import card_identity, load_records
from pebench.records.types import RunRecord
from pebench.records.versions import RANKED_PROTOCOL


@dataclass
class Frames:
    """The seven frames of :func:`frames` (see the module docstring), each keyed by ``run``."""

    runs: pd.DataFrame
    scores: pd.DataFrame
    lengths: pd.DataFrame
    positions: pd.DataFrame  # language models: (run, length, position, loss), the mean NLL by position bin
    curves: pd.DataFrame  # (run, step, loss, validation): the training curve, the primary metric's validation score
    capped: pd.DataFrame  # (run, bucket, capped): outputs stopped at the decoding cap without EOS, where not 0
    cells: pd.DataFrame  # (run, a, b, n, metric, value): a grid task's score per cell (len a, len b)


def _settings(record: RunRecord, current: dict[str, dict]) -> dict:
    """The record's changed settings (protocol 1 records: read from their overrides). A protocol 2
    record's task settings are taken against the card ``current`` holds for its task (the card
    of its newest run at the card's own settings, :func:`_current_cards`) where there is one, its
    overrides applied: a record of an earlier card (another step cap, other buckets: one that
    ``pebench sweep`` calls stale) is then a table of its own, ``name@<hash>``, neither joining
    the current card's runs nor ranked, with or without overrides of its own."""
    if record.settings is None:
        parsed = {}
        for override in record.overrides:
            key, _, raw = override.partition("=")
            parsed[key.strip()] = parse_value(raw.strip())
        return dict(sorted(parsed.items()))
    if record.protocol != RANKED_PROTOCOL or record.task["name"] not in current:
        return dict(record.settings)
    _, encoding = split_settings(record.settings)
    return dict(sorted({**encoding, **_card_changes(record.task, current[record.task["name"]])}.items()))


def _current_cards(records: list[RunRecord]) -> dict[str, dict]:
    """Per task name, the task card of its newest (``created``) successful protocol 2 record of
    the card's own task settings: the card its runs are compared at."""
    own = [r for r in records if r.status == "ok" and r.protocol == RANKED_PROTOCOL and r.settings is not None and not split_settings(r.settings)[0]]
    return {record.task["name"]: record.task for record in sorted(own, key=lambda r: r.created or "")}


def _card_changes(task: dict, card: dict) -> dict:
    """``{"section.key": value}`` (``{"key": value}`` outside the sections: the family, the
    plugin) for each setting of the task card ``task`` that differs from ``card``, both as
    records store them (:func:`pebench.records.store.card_identity`, prose left out); a setting
    ``card`` has and ``task`` lacks counts as None."""
    task, card = card_identity(task), card_identity(card)
    none = {"params": {}}  # no encoding: changed_settings compares the task sections alone
    lacking = {key: None for key in changed_settings(card, none, task, none)}  # None where task lacks the key; task's value, below, where it has it
    top = {
        name: task.get(name)
        for name in {*task, *card}
        if not isinstance(task.get(name, card.get(name)), dict) and (name not in task or name not in card or task[name] != card[name])
    }
    return {**lacking, **changed_settings(task, none, card, none), **top}


def split_settings(settings: dict) -> tuple[dict, dict]:
    """(task settings, encoding settings) of a record's changed settings."""
    encoding = {k: v for k, v in settings.items() if k.startswith("encoding.")}
    return {k: v for k, v in settings.items() if k not in encoding}, encoding


def _label(name: str, settings: dict) -> str:
    config = settings_hash(settings)
    return f"{name}@{config}" if config else name


def plugin_code(record: RunRecord) -> str:
    """The code of the encoding plugin that made ``record`` (:func:`pebench.core.registry.code_key`)
    in a row label's words: ``r<revision>`` for pebench's own plugins, ``<version>+<source
    hash>`` for another distribution's (``<version>`` in records older than the hash)."""
    key = code_key(record.plugin)
    if len(key) == 2:
        return f"r{key[1]}"
    _, _, version, source = key
    return f"{version}" + (f"+{source[:8]}" if source else "")


def _labels(records: list[RunRecord]) -> list[tuple[str, str]]:
    """(table, encoding row) labels of ``records``; an encoding whose records in one table come
    from two plugin codes (:func:`plugin_code`) gets a row per code, ``name [code]``, so that a
    row never pools two versions of a plugin."""
    labels, current = [], _current_cards(records)
    for record in records:
        task_settings, encoding_settings = split_settings(_settings(record, current))
        labels.append((_label(record.task["name"], task_settings), _label(record.encoding["name"], encoding_settings)))
    code = [plugin_code(record) for record in records]
    codes: dict[tuple[str, str], set[str]] = {}
    for label, one in zip(labels, code):
        codes.setdefault(label, set()).add(one)
    return [(table, f"{encoding} [{one}]" if len(codes[table, encoding]) > 1 else encoding) for (table, encoding), one in zip(labels, code)]


def frames(records: list[RunRecord]) -> Frames:
    """The seven frames of the successful records among ``records`` (see the module docstring)."""
    runs, scores, lengths, positions, curves, capped, cells = [], [], [], [], [], [], []
    records = [record for record in records if record.status == "ok"]
    for record, (table, encoding) in zip(records, _labels(records)):
        run = f"{table}/{encoding}/seed{record.seed}"
        runs.append(_run_row(record, run, table, encoding))
        scores += [{"run": run, **row} for row in _score_rows(record)]
        lengths += [
            {"run": run, "bucket": bucket.bucket, "length": entry.length, "n": entry.n, "metric": name, "value": value}
            for bucket in record.buckets
            for entry in bucket.lengths
            for name, value in entry.metrics.items()
        ]
        positions += [
            {"run": run, "length": bucket.hi, "position": (piece["from"] + piece["to"]) / 2, "loss": piece["loss"]}
            for bucket in record.buckets
            for piece in bucket.loss_by_position
        ]
        capped += [{"run": run, "bucket": bucket.bucket, "capped": bucket.capped} for bucket in record.buckets if bucket.capped]
        cells += [
            {"run": run, "a": entry.cell[0], "b": entry.cell[1], "n": entry.n, "metric": name, "value": value}
            for bucket in record.buckets
            for entry in bucket.cells
            for name, value in entry.metrics.items()
        ]
        primary = record.task["metrics"]["primary"]
        curves += [{"run": run, "step": point.step, "loss": point.loss, "validation": point.validation.get(primary)} for point in record.training.curve]
    columns = {
        "scores": ["run", "where", "order", "lo", "hi", "metric", "value"],
        "lengths": ["run", "bucket", "length", "n", "metric", "value"],
        "positions": ["run", "length", "position", "loss"],
        "curves": ["run", "step", "loss", "validation"],
        "capped": ["run", "bucket", "capped"],
        "cells": ["run", "a", "b", "n", "metric", "value"],
    }
    named = (("runs", runs), ("scores", scores), ("lengths", lengths), ("positions", positions), ("curves", curves), ("capped", capped), ("cells", cells))
    return Frames(*(pd.DataFrame(rows, columns=columns.get(name)) for name, rows in named))


def _run_row(record: RunRecord, run: str, table: str, encoding: str) -> dict:
    training, split = record.training, record.task["split"]
    return {
        "run": run,
        "task": record.task["name"],
        "table": table,
        "protocol": record.protocol,
        "encoding": encoding,
        "card": record.encoding["name"],
        "seed": record.seed,
        "learned": training.learned,
        "target": training.target,
        "steps": training.steps,
        "steps_to_target": training.steps_to_target,
        "wall_seconds": training.wall_seconds,
        "run_seconds": sum(record.stages.values()) if record.stages else float("nan"),
        "final_loss": training.final_loss,
        "primary": record.task["metrics"]["primary"],
        "metrics": tuple(record.task["metrics"]["names"]),
        "architecture": record.model["architecture"],
        "unit": split.get("unit", "tokens"),
        "train_lo": split["train"][0],
        "train_hi": split["train"][1],
        "encoding_parameters": record.parameters["encoding"],
        "threads": record.environment["threads"],
        "device": record.environment["device"],
        "git_commit": record.git_commit,
        "plugin": f"{code_key(record.plugin)[0]} {plugin_code(record)}",
        "data_origin": (record.data or {}).get("origin", "generated"),
    }


def _score_rows(record: RunRecord) -> list[dict]:
    """ID, OOD and per-bucket rows; protocol 1's ID and OOD read from its buckets."""
    names, rows = record.task["metrics"]["names"], []
    for order, bucket in enumerate(record.buckets, start=2):
        hi = bucket.hi if bucket.hi is not None else float("inf")
        metrics = bucket.metrics or {}
        rows += [{"where": bucket.bucket, "order": order, "lo": bucket.lo, "hi": hi, "metric": name, "value": metrics.get(name)} for name in names]
    split_scores = (record.scores.id, record.scores.ood) if record.scores is not None else _protocol1_scores(record, names)
    for order, (where, values) in enumerate(zip(("ID", "OOD"), split_scores)):
        rows += [{"where": where, "order": order, "lo": None, "hi": None, "metric": name, "value": (values or {}).get(name)} for name in names]
    return rows


def _protocol1_scores(record: RunRecord, names: list[str]) -> tuple[dict, dict]:
    """Protocol 1's (ID, OOD) scores: the ID bucket, and the plain mean of the OOD buckets (empty
    when one of them was not scored)."""
    buckets = record.buckets
    ood = [b.metrics for b in buckets if not b.in_distribution]
    return buckets[0].metrics or {}, {name: sum(m[name] for m in ood) / len(ood) for name in names} if ood and all(ood) else {}


def load_results(results: str | Path = USER_RESULTS) -> pd.DataFrame:
    """Every successful run under ``<results>/runs`` as one DataFrame: one row per run and
    length (protocol 1 records, which kept no lengths: one row per bucket, ``length`` NaN), with
    a column per metric (NaN where the task does not report it) and the run's metadata: task,
    table and encoding labels (``name@<hash>`` for other settings), card, seed, protocol,
    learned (reached the ID target; None without a target), target, steps, steps_to_target,
    wall_seconds (training), run_seconds (data, training and evaluation), final_loss, primary
    metric, architecture, length unit, training lengths, the encoding's parameter count,
    threads, device, git_commit and data_origin. Files that are not valid records are left out
    (``pebench report`` names them).

    Example::

        import pebench
        frame = pebench.load_results("results")
        frame.groupby(["task", "encoding", "length"])["sequence_accuracy"].mean()
    """
    records, _ = load_records(Path(results))
    table = frames(records)
    if table.runs.empty:
        return pd.DataFrame(columns=["run", "bucket", "length", "n", "task", "encoding", "seed"])
    bucket_rows = table.scores[table.scores.order >= 2].rename(columns={"where": "bucket"}).assign(length=float("nan"), n=float("nan"))
    protocol1 = table.runs.run[table.runs.protocol == 1]
    per_length = pd.concat([table.lengths, bucket_rows[bucket_rows.run.isin(protocol1)][table.lengths.columns]], ignore_index=True)
    keys = ["run", "bucket", "length"]
    per_length = per_length.assign(length=per_length["length"].fillna(-1))  # protocol 1's buckets, no length: a key of its own for now
    wide = per_length.drop_duplicates([*keys, "metric"]).set_index([*keys, "metric"])["value"].unstack("metric")  # the combinations that exist only
    wide = wide.join(per_length.drop_duplicates(keys).set_index(keys)["n"]).reset_index()
    return wide.assign(length=wide["length"].where(wide["length"] >= 0)).merge(table.runs, on="run", how="left")


def legend(records: list[RunRecord]) -> dict[str, dict]:
    """Every ``name@<hash>`` label among ``records`` and the settings it stands for."""
    labels, current = {}, _current_cards(records)
    for record in records:
        if record.status != "ok":
            continue
        task_settings, encoding_settings = split_settings(_settings(record, current))
        for name, settings in ((record.task["name"], task_settings), (record.encoding["name"], encoding_settings)):
            if settings:
                labels[_label(name, settings)] = settings
    return dict(sorted(labels.items()))
