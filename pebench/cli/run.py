"""``pebench run``: train and evaluate one (task, encoding, seed), write its record and print its
scores per length bucket (:func:`print_run`, which ``pebench evaluate`` prints too).

One process, or each process of a ``torchrun`` job (rank 0 prints and writes the record).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from pebench.cli.errors import fail
from pebench.cli.options import add_training_run
from pebench.core.metrics import METRICS
from pebench.records.store import check_writable
from pebench.records.types import ABSENT, RunRecord, TrainingSummary
from pebench.running import execution
from pebench.running.distributed import from_environment

HELP = "train and evaluate one (task, encoding, seed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoding", required=True, help="encoding card or plugin name (see `pebench list`)")
    parser.add_argument("--task", required=True, help="task card name (see `pebench list`)")
    parser.add_argument("--seed", type=int, default=0)
    add_training_run(
        parser,
        overrides_help="override a card value: training.steps=200, model.d_model=128, encoding.delta=0.05",
        quiet_help="no progress bar (there is none when stderr is not a terminal)",
    )
    parser.add_argument("--save-checkpoint", action="store_true", help="keep the trained weights (<results>/checkpoints/...), for pebench evaluate")
    parser.add_argument("--log", choices=execution.LOGGERS, help="also log the training curve: tensorboard (<results>/tensorboard/...)")


def command(args: argparse.Namespace) -> int:
    """Exit status 0 (the run is recorded ``ok``), 1 (recorded ``failed``) or 2 (bad input, nothing written)."""
    try:
        distributed, device = from_environment(args.device)  # a torchrun job, or this process alone
        main = distributed.is_main
        planned = execution.plan(args.task, args.encoding, args.seed, args.overrides, args.results, data_dir=args.data_dir)
        if main:
            where = f", {distributed.world_size} processes ({distributed.backend})" if distributed.world_size > 1 else ""
            print(f"pebench run: task {planned.task['name']}, encoding {planned.encoding['name']}, seed {args.seed}, device {device}{where}", file=sys.stderr)
        setup, data_seconds = execution.prepare(planned)
        if main:
            check_writable(args.results)
    except execution.BAD_INPUT as error:
        return fail(error)
    if planned.protocol.task.data and main:
        print(f"data: {', '.join(f'{k} {v}' for k, v in planned.protocol.task.data.items())}", file=sys.stderr)
    record = execution.execute(planned, setup, device, not args.quiet and main, data_seconds, args.save_checkpoint, distributed, args.log)
    distributed.finish()
    if not main:
        return 0
    if record.status != "ok":
        error = record.error
        print(f"pebench: run failed: {error['type']}: {error['message']}\nrecord: {planned.path}", file=sys.stderr)
        return 1
    print_run(record, planned.path)
    return 0


def print_run(record: RunRecord, path: Path) -> None:
    """The record's table (a row per bucket, then the ID and OOD scores, and the whole set's for
    text metrics), its training and parameter counts, and ``path``, on stdout."""
    metrics, primary = record.task["metrics"]["names"], record.task["metrics"]["primary"]
    digits = f".{METRICS[primary].digits}f"

    def value(metric_values: dict | None, name: str) -> str:
        found = (metric_values or {}).get(name)
        return "—" if found is None else format(found, digits)

    rows = [
        [
            b.bucket,
            "ID" if b.in_distribution else "OOD",
            b.n,
            *[value(b.metrics, m) for m in metrics],
            f"{b.eval_tokens_per_second:,.0f}" if b.eval_tokens_per_second else b.error or "—",
        ]
        for b in record.buckets
    ]
    scores = record.scores
    for split in ("ID", "OOD", "all")[: 3 if scores.all is not ABSENT else 2]:  # the whole set: text metrics
        rows.append([{"ID": "ID score", "OOD": "OOD score", "all": "whole set"}[split], "", "", *[value(scores.split(split), m) for m in metrics], ""])
    print(tabulate(rows, headers=["bucket", "split", "n", *metrics, "eval tok/s"], disable_numparse=True))
    if scores.unscored:
        print(f"not scored: bucket(s) {', '.join(scores.unscored)} (see eval tok/s); the scores of their splits are left out")
    training, parameters = record.training, record.parameters
    validated = training.curve[-1].validation.get(primary) if training.curve else None
    on_validation = "" if validated is None else f", {format(validated, digits)} on the ID validation set, not the evaluation set above"
    if training.target is None:
        stop = "no ID target"
    elif training.steps_to_target is None:
        stop = f"ID target {training.target:g} NOT reached{on_validation}: not ranked on OOD"
    else:
        stop = f"ID target {training.target:g} reached{on_validation}"
    print(
        f"\ntraining: {training.steps} of at most {training.step_cap} steps ({stop}) in {training.wall_seconds:.1f} s{_time_split(training)}, "
        f"{training.tokens_per_second:,.0f} tok/s{_padding(training)}, final loss {training.final_loss:.4f}, "
        f"peak memory {training.peak_memory_mb:.0f} MB ({training.memory_kind})"
    )
    print(f"parameters: {parameters['total']:,} total, {parameters['encoding']:,} in the encoding")
    print(f"record: {path}")


def _time_split(training: TrainingSummary) -> str:
    """`` (steps 9.8 s, batches 0.4 s, validation 1.2 s)``: the parts of the training time a
    record has (none for one made before they were measured)."""
    parts = {"steps": training.step_seconds, "batches": training.batch_seconds, "validation": training.validation_seconds}
    known = [f"{name} {seconds:.1f} s" for name, seconds in parts.items() if seconds is not None]
    return f" ({', '.join(known)})" if known else ""


def _padding(training: TrainingSummary) -> str:
    """``, padding 23.4% of batch tokens`` (the training batches'), where the record has it."""
    return "" if training.padding_share is None else f", padding {training.padding_share:.1%} of batch tokens"
