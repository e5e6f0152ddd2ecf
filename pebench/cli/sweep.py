"""``pebench sweep``: a grid of tasks x encodings x seeds, every cell checked before any runs,
the cells whose record is complete and current skipped (so a stopped sweep resumes), the others
run on an engine (:mod:`pebench.running.engines`: here, Ray tasks or a Slurm job array)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from pebench.cli.errors import fail
from pebench.cli.options import add_training_run
from pebench.config.cards import encoding_cards, task_cards
from pebench.records.store import check_writable
from pebench.running import execution, sweep
from pebench.running.devices import resolve_device
from pebench.running.engines import ENGINES, EngineOptions

HELP = "run a grid of tasks x encodings x seeds; resumable"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encodings", default="all", help="comma-separated encodings, or all (default)")
    parser.add_argument("--tasks", default="all", help="comma-separated tasks or suites (chomsky, synthetic, real, arithmetic), or all (default)")
    parser.add_argument("--seeds", default="0", help="seeds: 0,1,2 or 0-2 (default 0)")
    parser.add_argument("--retry-failed", action="store_true", help="run again the cells whose record says failed")
    add_training_run(parser, overrides_help="override a card value in every run", quiet_help="no progress bars (there are none when stderr is not a terminal)")
    parser.add_argument("--save-checkpoints", action="store_true", help="keep every run's trained weights (off by default: they take space)")
    scale = parser.add_argument_group("engines", "where the runs execute (see README, Scaling out)")
    scale.add_argument("--engine", default="local", choices=ENGINES, help="local (one after another, here), ray (Ray tasks) or slurm (a submitit job array)")
    scale.add_argument("--cpus-per-run", type=int, default=1, help="ray, slurm: CPUs (torch threads) of each run (default 1)")
    scale.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="ray: GPUs of each run, fractions allowed (0.25: four runs share a GPU); slurm: whole GPUs"
    )
    scale.add_argument("--address", help="ray: the address of a running cluster (default: a local Ray instance)")
    scale.add_argument("--partition", help="slurm: the partition")
    scale.add_argument("--time", type=int, default=60, help="slurm: each job's time limit in minutes (default 60)")
    scale.add_argument("--slurm-cluster", default="slurm", choices=("slurm", "local", "debug"), help=argparse.SUPPRESS)  # submitit's test executors


def command(args: argparse.Namespace) -> int:
    """Exit status 0 (every run ok), 1 (a run failed), 2 (bad input, nothing run) or 130 (interrupted)."""
    try:
        tasks = sweep.names(args.tasks, task_cards(), "tasks")
        encodings = sweep.names(args.encodings, encoding_cards(), "encodings")
        cells = sweep.plan_grid(tasks, encodings, sweep.seeds(args.seeds), args.overrides, args.results, args.data_dir)
        options = EngineOptions(
            args.engine, args.device, args.cpus_per_run, args.gpus_per_run, args.address, args.partition, args.time, args.slurm_cluster, args.save_checkpoints
        )
        device = resolve_device(args.device) if args.engine == "local" else args.device  # elsewhere each worker resolves it
        check_writable(args.results)
    except execution.BAD_INPUT as error:
        return fail(error)
    states = Counter(cell.state for cell in cells)
    print(
        f"pebench sweep: {len(tasks)} tasks x {len(encodings)} encodings x {len(cells) // (len(tasks) * len(encodings))} seeds = {len(cells)} runs "
        f"({', '.join(f'{n} {state}' for state, n in states.items())}); device {device}, engine {args.engine}",
        file=sys.stderr,
    )
    summary = sweep.run_grid(cells, options, args.retry_failed, progress=not args.quiet)
    skipped = ", ".join(f"{n} {state}" for state, n in summary["skipped"].items()) or "none"
    print(f"\nsweep: {summary['ok']} runs ok, {len(summary['failed'])} failed, skipped {skipped}; {summary['seconds'] / 60:.1f} min")
    for label, error in summary["failed"]:
        print(f"  failed: {label}: {error}")
    if summary["interrupted"]:
        print("sweep interrupted: finished runs are recorded; run the same command to continue", file=sys.stderr)
        return 130
    return 1 if summary["failed"] else 0
