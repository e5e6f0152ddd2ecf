"""The ``pebench`` command: ``run``, ``evaluate``, ``list``, ``report``, ``plan``, ``sweep``, ``bench``.

- ``run``: train and evaluate one (task, encoding, seed) and write its record (:mod:`pebench.cli.run`);
- ``evaluate``: score a saved model again at other lengths or decoding settings (:mod:`pebench.cli.evaluate`);
- ``list``: the encoding and task cards (:mod:`pebench.cli.listing`);
- ``report``: the leaderboards from the run records (:mod:`pebench.cli.report`);
- ``plan``: the seeds each validity claim needs, and the sweeps that run them (:mod:`pebench.cli.plan`);
- ``sweep``: a resumable grid of tasks x encodings x seeds on an engine (:mod:`pebench.cli.sweep`);
- ``bench``: the throughput of every encoding, side by side in one process (:mod:`pebench.cli.bench`).

Each command's module gives its ``HELP`` line, ``add_arguments(parser)`` and ``command(args)``
returning the exit status; the options several commands share are defined once, in
:mod:`pebench.cli.options`.

Bad input (an unknown encoding or task, an impossible length split, a malformed ``--set``, a
value a plugin refuses, a missing device, a results folder that cannot be written) exits with
status 2 and a message saying what to do, before anything is trained or written. A run that
fails while training or evaluating is recorded as ``failed`` with its error and exits with
status 1. Ctrl-C prints one line, writes no partial run record and exits 130; ``bench`` keeps the
shapes it has timed in ``partial/`` beside its tables, which only a whole run replaces.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from pebench import __version__
from pebench.cli import bench, evaluate, listing, plan, report, run, sweep
from pebench.cli.errors import fail
from pebench.cli.options import set_threads
from pebench.core.registry import PluginConflictError

COMMANDS = {"run": run, "evaluate": evaluate, "list": listing, "report": report, "plan": plan, "sweep": sweep, "bench": bench}  # as --help lists them


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``args.command`` names the one given."""
    parser = argparse.ArgumentParser(prog="pebench", description="Length-extrapolation benchmark of positional encodings.")
    parser.add_argument("--version", action="version", version=f"pebench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_arguments(commands.add_parser(name, help=module.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` (default: ``sys.argv[1:]``); return its exit status (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        set_threads(getattr(args, "threads", None))
    except ValueError as error:
        return fail(error)
    # Denormal floats flush to zero on the CPU (docs/design.md). The flag is per thread, and torch's
    # worker threads copy it when they start, so it is set here, before any torch work starts them.
    torch.set_flush_denormal(True)
    try:
        return COMMANDS[args.command].command(args)
    except BrokenPipeError:  # `pebench list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except PluginConflictError as error:  # found when plugins are first listed, by any command
        return fail(error)
    except KeyboardInterrupt:  # Ctrl-C: the run in progress is not recorded (records are written whole, at its end)
        print(f"\npebench {args.command}: interrupted; nothing was written for the work in progress", file=sys.stderr)
        return 130
