"""``pebench plan``: the seeds each validity claim's pairs need for 80% power, and the sweeps that
run them (:func:`pebench.analysis.seed_plan.render_plan`), from the records of a results folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pebench.records.paths import USER_RESULTS
from pebench.records.store import load_records

HELP = "the seeds each validity claim's pairs need for 80%% power, and the sweeps that run them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="?", type=Path, default=USER_RESULTS, help="the results folder (default: %(default)s)")


def command(args: argparse.Namespace) -> int:
    records, skipped = load_records(args.results)
    for path, reason in skipped:
        print(f"pebench plan: skipping {path}: {reason}", file=sys.stderr)
    from pebench.analysis.frames import frames
    from pebench.analysis.seed_plan import render_plan

    print(render_plan(frames([record for record in records if record.status == "ok"])), end="")
    return 0
