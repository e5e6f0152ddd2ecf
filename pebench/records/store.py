"""Run records on disk: one JSON file per run (a :class:`pebench.records.types.RunRecord`),
validated and written atomically, read back into the same type.

Path: ``<results>/runs/<task>/<encoding>/seed<k>.json``; a run whose resolved settings differ
from the cards' (``--set``) is another configuration and gets ``seed<k>-<hash>.json``, the hash
of those settings (:func:`pebench.config.overrides.changed_settings`), so it never overwrites the card's own
run, and equal settings however spelled share one file. A record is written once, complete,
through a temporary file in the same folder and ``os.replace``: a crash or kill leaves the old
record or none, never half of one.

Schema 2 (protocol 2, :mod:`pebench.config.protocol`) adds the ID validation curve and the stopping
step (``training``), per-length scores in every bucket and the run's ID and OOD scores
(``scores``). Records of schema 1 (protocol 1) are still read by the report, as protocol 1.
"""

from __future__ import annotations

import functools
import json
import math
import os
import stat
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from pebench import __version__
from pebench.records import paths as layout
from pebench.records.paths import settings_hash
from pebench.records.types import RunRecord
from pebench.records.versions import PROTOCOL_VERSION, SCHEMA_VERSION


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


PROSE = ("description", "reference", "suite")  # a card's words about itself: they change no result


def card_identity(card: dict) -> dict:
    """A card as stored in records, without its prose (:data:`PROSE`): two runs made from cards
    of equal identity ran the same protocol (or encoding)."""
    stored = json.loads(json.dumps(json_safe(card)))
    return {key: value for key, value in stored.items() if key not in PROSE}


def new_record(
    task_card: dict, encoding_card: dict, seed: int, overrides: list[str], settings: dict, plugin: dict, task_plugin: dict | None = None
) -> RunRecord:
    """The header of a run record, ``running``; the run completes it
    (:meth:`~pebench.records.types.RunRecord.with_measurements`). ``overrides`` are the user's
    ``--set`` words as given, ``settings`` what they changed (the configuration's identity),
    ``plugin`` the package that provides the encoding, its version and the plugin's
    ``revision``; ``task_plugin`` the task family's package."""
    return RunRecord(
        schema=SCHEMA_VERSION,
        protocol=PROTOCOL_VERSION,
        pebench_version=__version__,
        git_commit=git_commit(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        task=task_card,
        encoding=encoding_card,
        plugin=plugin,
        overrides=tuple(overrides),
        settings=settings,
        config=settings_hash(settings),
        seed=seed,
        status="running",
        task_plugin=task_plugin,
    )


def write_record(path: Path, record: RunRecord) -> None:
    """Write ``record`` to ``path`` atomically (:func:`write_atomically`).

    Raises:
        ValueError: for a successful run's record that breaks the record schema (nothing written).
    """
    text = json.dumps(json_safe(record.to_json()), indent=2, allow_nan=False) + "\n"  # fails before any file exists
    problem = record_problem(json.loads(text)) if record.status == "ok" else None
    if problem:
        raise ValueError(f"pebench made a record that breaks its schema, {problem}; nothing was written to {path}")
    write_atomically(path, text)


def write_atomically(path: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` (parent folders made) so that a
    reader or a crash sees the old file or the new one, never a part: temporary file beside it,
    fsync, rename. The file keeps the permissions of the one it replaces; a new one gets the
    usual ``0o666`` less the umask (not the temporary file's ``0o600``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    permissions = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~_umask()
    kind = {"mode": "wb"} if isinstance(content, bytes) else {"mode": "w", "encoding": "utf-8"}
    with tempfile.NamedTemporaryFile(**kind, dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as file:
        try:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
            os.chmod(file.name, permissions)
        except BaseException:
            os.unlink(file.name)
            raise
    os.replace(file.name, path)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def check_writable(results: Path) -> None:
    """Raise ValueError unless run records can be written under ``<results>/runs`` (made when
    missing), so that a run stops before training rather than lose its scores after it."""
    runs = layout.runs_dir(results)
    try:
        runs.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=runs, prefix=".write-check."):
            pass
    except OSError as error:
        raise ValueError(f"cannot write run records under {runs}: {error.strerror or error}; choose another folder with --results") from None


def is_complete(record: RunRecord) -> bool:
    """True for a finished, successful record of this schema with every bucket and its scores."""
    return (
        record.schema == SCHEMA_VERSION
        and record.status == "ok"
        and record.scores is not None
        and len(record.buckets) == len(record.task.get("split", {}).get("buckets", [None]))
    )


def read_record(path: Path) -> RunRecord:
    """The record at ``path``, successful or not, as it is on disk (no schema check: see
    :func:`record_problem`).

    Raises:
        ValueError: for a file that cannot be read, is not JSON, or is not a run record.
    """
    try:
        data = json.loads(Path(path).read_text())
        return RunRecord.from_json(data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the record {path}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a run record ({type(error).__name__}: {error})") from None


def load_records(results: Path) -> tuple[list[RunRecord], list[tuple[Path, str]]]:
    """Every record under ``<results>/runs`` that can be reported, and the files skipped, each
    with the reason (unreadable, not JSON, not a record, a failed run)."""
    records, skipped = [], []
    for path in layout.record_files(results):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            skipped.append((path, f"unreadable: {error}"))
            continue
        problem = record_problem(data)
        if problem:
            skipped.append((path, problem))
            continue
        records.append(RunRecord.from_json(data))
    return records, skipped


def record_problem(record) -> str | None:
    """Why ``record`` cannot be reported (None when it can): not an object, a failed or
    unfinished run, a schema this pebench does not read, or a record that breaks its JSON
    schema (``schema.json``; the first error, with where it is)."""
    if not isinstance(record, dict):
        return f"not a run record (a JSON {type(record).__name__})"
    if record.get("status") != "ok":
        error = record.get("error")
        return f"status {record.get('status')!r}" + (f" ({error.get('type')}: {str(error.get('message'))[:120]})" if isinstance(error, dict) else "")
    if record.get("schema") not in (1, SCHEMA_VERSION):
        return f"schema {record.get('schema')!r}, not one this pebench reads (1 or {SCHEMA_VERSION})"
    error = jsonschema.exceptions.best_match(_validator().iter_errors(record))
    if error is not None:
        where = "/".join(map(str, error.absolute_path))
        return f"not a valid record{f' at {where}' if where else ''}: {error.message[:200]}"
    return None


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads((Path(__file__).parent / "schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)
