"""Run records: one JSON file per run, written atomically, loaded into pandas.

Path: ``<results>/runs/<task>/<encoding>/seed<k>.json``; a run with ``--set`` overrides is
another configuration and gets ``seed<k>-<hash>.json`` (hash of the overrides), so it never
overwrites the card's own run. A record is written once, complete, through a temporary file in
the same folder and ``os.replace``: a crash or kill leaves the old record or none, never half
of one.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import __version__
from .cards import overrides_hash

SCHEMA_VERSION = 1


def record_path(results: Path, task: str, encoding: str, seed: int, overrides: list[str]) -> Path:
    suffix = f"-{overrides_hash(overrides)}" if overrides else ""
    return Path(results) / "runs" / task / encoding / f"seed{seed}{suffix}.json"


@functools.cache
def git_commit() -> str | None:
    """The commit of the pebench source tree, when it is a git checkout; asked once per process,
    so that every record of a sweep names the commit whose code the process loaded."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def json_safe(value):
    """JSON has no infinity or NaN: TOML's ``inf`` (an open-ended bucket) is stored as the
    string "inf", and a NaN (a diverged loss) as null."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def new_record(task_card: dict, encoding_card: dict, seed: int, overrides: list[str]) -> dict:
    """The header of a run record; the run fills in the rest."""
    return {
        "schema": SCHEMA_VERSION,
        "pebench_version": __version__,
        "git_commit": git_commit(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "task": task_card,
        "encoding": encoding_card,
        "overrides": sorted(overrides),
        "config": overrides_hash(overrides) if overrides else "",
        "seed": seed,
        "status": "running",
    }


def write_record(path: Path, record: dict) -> None:
    """Write ``record`` to ``path`` atomically (:func:`write_atomically`)."""
    write_atomically(path, json.dumps(json_safe(record), indent=2, allow_nan=False) + "\n")  # fails before any file exists


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (parent folders made) so that a reader or a crash sees the old
    file or the new one, never a part: temporary file beside it, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as file:
        try:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        except BaseException:
            os.unlink(file.name)
            raise
    os.replace(file.name, path)


def is_complete(record: dict) -> bool:
    """True for a finished, successful record of this schema with every bucket present."""
    return (
        record.get("schema") == SCHEMA_VERSION
        and record.get("status") == "ok"
        and len(record.get("buckets", [])) == len(record.get("task", {}).get("split", {}).get("buckets", [None]))
    )


def load_records(results: Path) -> list[dict]:
    """Every readable record under ``<results>/runs``; unreadable files are skipped with a warning."""
    records = []
    for path in sorted(Path(results).glob("runs/*/*/*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as error:
            warnings.warn(f"pebench: skipping unreadable record {path}: {error}", RuntimeWarning, stacklevel=2)
    return records


def to_frame(records: list[dict]) -> pd.DataFrame:
    """One row per (successful run, bucket): task, encoding (with ``@<hash>`` for overridden
    configurations), seed, bucket, lo, hi, in_distribution, n, the name of the task's primary
    metric, the model's architecture, the length unit, the longest training length, each
    metric's value and the encoding's parameter count (throughput comes from the benchmark,
    :mod:`pebench.bench`, not from runs)."""
    rows = []
    for record in records:
        if not is_complete(record):
            continue
        encoding = record["encoding"]["name"] + (f"@{record['config']}" if record.get("config") else "")
        primary = record["task"]["metrics"]["primary"]
        for bucket in record["buckets"]:
            metrics = bucket["metrics"] or {}
            rows.append({
                "task": record["task"]["name"],
                "encoding": encoding,
                "seed": record["seed"],
                "bucket": bucket["bucket"],
                "lo": bucket["lo"],
                "hi": bucket["hi"],
                "in_distribution": bucket["in_distribution"],
                "n": bucket["n"],
                "primary_metric": primary,
                "architecture": record["model"]["architecture"],
                "unit": record["task"]["split"].get("unit", "tokens"),
                "train_max": record["task"]["split"]["train"][1],
                **{name: metrics.get(name, float("nan")) for name in record["task"]["metrics"]["names"]},
                "encoding_parameters": record["parameters"]["encoding"],
            })
    return pd.DataFrame(rows)
