"""``pebench evaluate``: score the saved model of a run (``pebench run --save-checkpoint``) again at
other lengths or decoding settings, without training (:func:`pebench.running.checkpoints.rescore`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pebench.cli.errors import fail
from pebench.cli.options import add_data_dir, add_device, add_overrides, add_results, add_threads
from pebench.cli.run import print_run
from pebench.records.store import check_writable
from pebench.running import checkpoints, execution
from pebench.running.devices import resolve_device

HELP = "score a saved model again at other lengths or decoding settings"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", type=Path, help="the run record of a run made with --save-checkpoint")
    add_overrides(parser, "split.buckets, split.eval_examples, split.eval_seed or decoding.*, e.g. 'split.buckets=[[1,16],[65,128]]'")
    add_results(parser)
    add_device(parser)
    add_data_dir(parser)
    add_threads(parser)


def command(args: argparse.Namespace) -> int:
    """Exit status 0 (the new record is written) or 2 (bad input, nothing written)."""
    try:
        device = resolve_device(args.device)
        check_writable(args.results)
        tick = time.perf_counter()
        record, path = checkpoints.rescore(args.record, args.overrides, args.results, device, args.data_dir)
    except execution.BAD_INPUT as error:
        return fail(error)
    print_run(record, path)
    print(f"scored from {record.evaluated_from['checkpoint']} in {time.perf_counter() - tick:.1f} s, without training")
    return 0
