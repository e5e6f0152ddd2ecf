"""The options that several ``pebench`` commands share, each defined once: ``add_<option>(parser)``
adds it to a command's parser; :func:`set_threads` applies ``--threads`` before a command runs."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from pebench.records.paths import USER_RESULTS
from pebench.tasks.data import DATA_ENV

RESULTS_HELP = (
    f"results folder: runs/ (the records), leaderboards/ and throughput/ (default: ./{USER_RESULTS}; "
    "the committed grid, tables and benchmark: --results results)"
)
THREADS_HELP = (
    "CPU threads of torch's operations (default: torch's own, the cores; recorded in each run): the order of "
    "floating-point sums, so a run's numbers, depend on it"
)


def add_device(parser: argparse.ArgumentParser) -> None:
    """``--device``: a name for :func:`pebench.running.devices.resolve_device` (default ``auto``)."""
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:N")


def add_results(parser: argparse.ArgumentParser, help: str = RESULTS_HELP, dest: str = "results", default: Path | None = USER_RESULTS) -> None:
    """``--results FOLDER`` into ``args.<dest>`` (a ``Path``; ``default`` when not given)."""
    parser.add_argument("--results", dest=dest, type=Path, default=default, help=help)


def add_overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE``, repeatable, into the list ``args.overrides`` (empty when not given)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    """``--data-dir FOLDER`` into ``args.data_dir`` (None when not given: ``$PEBENCH_DATA``, else the hub)."""
    parser.add_argument("--data-dir", type=Path, help=f"folder of real datasets (default: ${DATA_ENV}, else the Hugging Face hub)")


def add_threads(parser: argparse.ArgumentParser, help: str = THREADS_HELP) -> None:
    """``--threads N`` into ``args.threads`` (None when not given); :func:`set_threads` applies it."""
    parser.add_argument("--threads", type=int, help=help)


def add_training_run(parser: argparse.ArgumentParser, overrides_help: str, quiet_help: str) -> None:
    """The options of a command that trains runs (``run``, ``sweep``), in ``--help``'s order:
    ``--device``, ``--results``, ``--set``, ``--data-dir``, ``--quiet`` (into ``args.quiet``), ``--threads``."""
    add_device(parser)
    add_results(parser)
    add_overrides(parser, overrides_help)
    add_data_dir(parser)
    parser.add_argument("--quiet", action="store_true", help=quiet_help)
    add_threads(parser)


def set_threads(threads: int | None) -> None:
    """Give torch's CPU operations ``threads`` threads (None: leave torch's own number).

    Raises:
        ValueError: for fewer than 1 thread.
    """
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"--threads must be at least 1; got {threads}")
    torch.set_num_threads(threads)
