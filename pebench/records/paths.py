"""The results folder: the one place that knows where pebench writes what.

::

    <results>/runs/<task>/<encoding>/seed<k>[-<hash>].json   run records (<hash>: other settings)
    <results>/checkpoints/<task>/<encoding>/seed<k>[-<hash>].pt   trained weights, where kept
    <results>/tensorboard/<task>/<encoding>/seed<k>[-<hash>]/    training curves for TensorBoard
    <results>/leaderboards/                                       tables and plots (pebench report)
    <results>/throughput/                                         pebench bench (quick/ for --quick)
    <results>/slurm/                                              submitit's job files

A run's *name* is its record's path under ``runs/`` without the suffix
(``copy/rope/seed0``); checkpoints and TensorBoard logs are named the same way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

USER_RESULTS = Path("pebench-results")  # where runs, reports and benchmarks go unless --results says otherwise
RUNS, CHECKPOINTS, TENSORBOARD, LEADERBOARDS, THROUGHPUT, SLURM = "runs", "checkpoints", "tensorboard", "leaderboards", "throughput", "slurm"


def committed_results() -> Path | None:
    """The committed ``results/`` of the pebench checkout this package runs from (an editable
    install of a clone), None where there is none (an installed wheel carries no records)."""
    folder = Path(__file__).resolve().parents[2] / "results"
    return folder if (folder / RUNS).is_dir() else None


def runs_dir(results: Path) -> Path:
    return Path(results) / RUNS


def record_path(results: Path, task: str, encoding: str, seed: int, settings: dict) -> Path:
    """Where the record of (task, encoding, seed) with the changed ``settings`` lives
    (:func:`pebench.config.overrides.changed_settings`; {} for the cards' own): ``seed<k>.json``,
    or ``seed<k>-<hash>.json`` with their :func:`settings_hash`."""
    config = settings_hash(settings)
    return runs_dir(results) / task / encoding / f"seed{seed}{'-' + config if config else ''}.json"


def record_files(results: Path) -> list[Path]:
    """Every record file under ``<results>/runs``, sorted."""
    return sorted(runs_dir(results).glob("*/*/*.json"))


def results_of(record: Path) -> Path:
    """The results folder that holds the record at ``record``."""
    return Path(record).parents[3]


def run_name(record: Path) -> Path:
    """``<task>/<encoding>/seed<k>[-<hash>]`` of the record at ``record``."""
    return Path(record).relative_to(runs_dir(results_of(record))).with_suffix("")


def checkpoint_path(record: Path) -> Path:
    """Where the checkpoint of the run recorded at ``record`` goes."""
    return results_of(record) / CHECKPOINTS / run_name(record).with_suffix(".pt")


def tensorboard_dir(record: Path) -> Path:
    """Where the TensorBoard log of the run recorded at ``record`` goes."""
    return results_of(record) / TENSORBOARD / run_name(record)


def leaderboards_dir(results: Path) -> Path:
    return Path(results) / LEADERBOARDS


def throughput_dir(results: Path) -> Path:
    return Path(results) / THROUGHPUT


def slurm_dir(results: Path) -> Path:
    return Path(results) / SLURM


def settings_hash(settings: dict) -> str:
    """A short stable hash of :func:`pebench.config.overrides.changed_settings` ("" for the cards' own configuration),
    for record file names and report labels."""
    if not settings:
        return ""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
