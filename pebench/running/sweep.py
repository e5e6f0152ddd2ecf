"""``pebench sweep``: every (task, encoding, seed) of a grid, resumable.

The grid runs seed by seed (every task and encoding at the first seed, then the next seed), on
an engine (:mod:`pebench.running.engines`): one run at a time in this process by default, each exactly as
``pebench run`` would do it, or as Ray tasks or a Slurm job array. Before running, each cell's
record is looked up:

- *done*: a complete record made from the same cards and overrides; skipped;
- *failed*: a failed record of the same cards; skipped unless ``--retry-failed``;
- *stale*: a record made from other cards (a card changed since), or by an older ``revision``
  of its encoding plugin; run again, replacing it;
- *missing* (or unreadable): run.

A run that fails is recorded as failed with its error and the sweep goes on. Records are
written atomically when a run ends, so an interrupted sweep (Ctrl-C, SIGTERM, SIGKILL, a power
cut) leaves every record whole and the run in progress unrecorded; the same command continues
where it stopped.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from pebench.config.cards import suite_cards, suite_tasks
from pebench.records.store import is_complete, read_record
from pebench.records.types import RunRecord
from pebench.running import engines, execution
from pebench.running.engines import EngineOptions
from pebench.running.execution import Planned


@dataclass
class Cell:
    planned: Planned
    state: str  # "done", "failed", "stale" or "missing"


def names(requested: str, known: dict, kind: str) -> list[str]:
    """``"all"`` or a comma-separated list of names, checked later by :func:`plan_grid`; a
    suite's name (a suite card, ``suites/*.toml``: ``chomsky``, ``synthetic``, ``real``) stands
    for its tasks, in the order of ``known``."""
    if requested == "all":
        return list(known)
    chosen = [name.strip() for name in requested.split(",") if name.strip()]
    if not chosen:
        raise ValueError(f"--{kind} needs 'all' or a comma-separated list of names; got {requested!r}")
    suites = {suite: [name for name in known if name in suite_tasks(suite)] for suite in suite_cards()}
    expanded = [member for name in chosen for member in (suites[name] if name not in known and name in suites else [name])]
    return list(dict.fromkeys(expanded))


def seeds(requested: str) -> list[int]:
    """Seeds from ``"0,1,2"`` or a range ``"0-2"``.

    Raises:
        ValueError: for anything else, and for a range with no seed (``2-0``).
    """
    try:
        if "-" in requested.strip("-"):
            first, last = (int(part) for part in requested.split("-"))
            found = list(range(first, last + 1))
        else:
            found = [int(part) for part in requested.split(",")]
    except ValueError:
        raise ValueError(f"--seeds expects a list such as 0,1,2 or a range such as 0-2; got {requested!r}") from None
    if not found:
        raise ValueError(f"--seeds {requested} is an empty range (its last seed comes before its first): write {last}-{first}")
    return found


def state_of(planned: Planned) -> str:
    """The cell's state from its record on disk (see the module docstring)."""
    if not planned.path.is_file():
        return "missing"
    try:
        record = read_record(planned.path)
    except ValueError:
        return "missing"
    if not planned.matches(record):
        return "stale"
    if is_complete(record):
        return "done"
    return "failed" if record.status == "failed" else "missing"


def plan_grid(tasks: list[str], encodings: list[str], seed_list: list[int], overrides: list[str], results: Path, data_dir: Path | None = None) -> list[Cell]:
    """Every cell, seed-major, checked before anything runs; real-data tasks read ``data_dir``
    (:func:`pebench.running.execution.plan`).

    Raises:
        the errors of :func:`pebench.running.execution.plan` for the first bad cell.
    """
    cells, resolved = [], {}
    for seed in seed_list:
        for task in tasks:
            for encoding in encodings:
                planned = execution.plan(task, encoding, seed, overrides, results, resolved, data_dir)
                cells.append(Cell(planned, state_of(planned)))
    return cells


class Stop(BaseException):
    """SIGTERM during a sweep: stop like Ctrl-C, writing nothing for the run in progress (a
    BaseException, so that the failure handling of a run does not record it)."""


def _raise_stop(signum, frame):
    raise Stop(f"signal {signum}")


def run_grid(cells: list[Cell], options: EngineOptions, retry_failed: bool, progress: bool = True) -> dict:
    """Run the cells that need it on the options' engine (:mod:`pebench.running.engines`); return the
    summary: counts per outcome, the failures (label, error), wall seconds and whether the sweep
    was interrupted."""
    runs = [c.state in ("missing", "stale") or (retry_failed and c.state == "failed") for c in cells]
    todo = [cell for cell, needed in zip(cells, runs) if needed]
    summary = {"skipped": Counter(cell.state for cell, needed in zip(cells, runs) if not needed), "ok": 0, "failed": [], "interrupted": False}
    started = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    bar = tqdm(total=len(todo), desc="sweep", unit="run", disable=None if progress else True)  # None: off when stderr is not a terminal

    def finished(index: int, record: RunRecord) -> None:
        bar.update(1)
        bar.set_postfix_str(todo[index].planned.label)
        if record.status == "ok":
            summary["ok"] += 1
        else:
            summary["failed"].append((todo[index].planned.label, f"{record.error['type']}: {record.error['message']}"))

    try:
        engines.run_cells([cell.planned for cell in todo], options, progress, finished)
    except (KeyboardInterrupt, Stop):
        summary["interrupted"] = True
    finally:
        bar.close()
        signal.signal(signal.SIGTERM, previous)
    summary["seconds"] = time.perf_counter() - started
    return summary
