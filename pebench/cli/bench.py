"""``pebench bench``: the throughput benchmark (:mod:`pebench.bench.throughput`) from the command
line: its options, the settings they make, and where the tables go. After each shape the table of
the shapes timed so far is saved in ``partial/`` beside the tables; a whole run replaces the
tables and removes ``partial/``."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pebench.bench import throughput
from pebench.bench.throughput import FULL, QUICK, VOCAB_SIZE, Settings, Shape
from pebench.cli.errors import fail
from pebench.cli.options import add_device, add_results, add_threads
from pebench.core.registry import UnknownNameError
from pebench.model.architecture import Architecture
from pebench.records import paths as layout
from pebench.records.paths import USER_RESULTS
from pebench.running.devices import resolve_device

HELP = "throughput of every encoding, side by side in one process"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="two small shapes, two rounds (a smoke test, not figures)")
    parser.add_argument("--encodings", help="comma-separated encodings (default: every card, plus flow+torchdiffeq and flow+adjoint)")
    parser.add_argument("--shapes", help="comma-separated ARCHITECTURE:LENGTH, e.g. decoder:256,encoder_decoder:64 (default: all five)")
    parser.add_argument("--rounds", type=int, help="timed rounds after the warm-up round (default 10; 2 with --quick)")
    parser.add_argument("--tokens", type=int, help="tokens per batch (default 8192; 512 with --quick)")
    add_device(parser)
    add_threads(parser, "CPU threads of torch's operations (default: torch's own, the cores)")
    parser.add_argument("--no-peer", action="store_true", help="leave out x-transformers")
    add_results(
        parser,
        f"results folder: the tables go to <results>/throughput, which pebench report reads, or to "
        f"<results>/throughput/quick with --quick, so that a smoke test never replaces the figures (default: ./{USER_RESULTS})",
    )
    parser.add_argument("--out", type=Path, help="the exact folder of the tables instead (e.g. results/throughput-gpu)")


def command(args: argparse.Namespace) -> int:
    """Exit status 0 (the tables are written) or 2 (bad options, an unknown encoding, a missing device)."""
    try:
        settings = settings_from(args)
        chosen = throughput.contenders(settings)
    except (UnknownNameError, ValueError, RuntimeError) as error:
        return fail(error)
    names = ", ".join(c.name for c in chosen)
    print(f"pebench bench: {len(chosen)} contenders ({names}) on {', '.join(map(str, settings.shapes))}, device {settings.device}", file=sys.stderr)
    out, command_line = output_folder(args), " ".join(["pebench", *args.argv])
    partial = out / "partial"  # the shapes timed so far; out's own tables are replaced only by a whole run's
    table = throughput.run_benchmark(
        settings,
        chosen,
        progress=lambda message: print(message, file=sys.stderr),
        shape_done=lambda so_far: throughput.write(so_far, settings, partial, command_line),
    )
    print(throughput.render(table, "simple"))
    written = throughput.write(table, settings, out, command_line)
    shutil.rmtree(partial, ignore_errors=True)
    print(f"written: {', '.join(map(str, written))}")
    return 0


def output_folder(args: argparse.Namespace) -> Path:
    """``--out``, else ``<results>/throughput`` (``<results>/throughput/quick`` with ``--quick``)."""
    return args.out or layout.throughput_dir(args.results) / ("quick" if args.quick else "")


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """Shapes from ``"decoder:256,encoder_decoder:64"``.

    Raises:
        ValueError: for an unknown architecture or a length that is not a positive integer.
    """
    shapes = []
    for item in text.split(","):
        architecture, _, length = item.strip().partition(":")
        if architecture not in VOCAB_SIZE or not length.isdigit() or int(length) < 1:
            raise ValueError(f"--shapes expects ARCHITECTURE:LENGTH with ARCHITECTURE one of {', '.join(VOCAB_SIZE)}; got {item!r}")
        shapes.append(Shape(Architecture(architecture), int(length)))
    return tuple(shapes)


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the parsed ``pebench bench`` arguments.

    Raises:
        ValueError: for fewer than 1 round or tokens.
    """
    settings = Settings(
        shapes=parse_shapes(args.shapes) if args.shapes else QUICK if args.quick else FULL,
        rounds=args.rounds if args.rounds is not None else 2 if args.quick else Settings.rounds,
        tokens_per_batch=args.tokens if args.tokens is not None else 512 if args.quick else Settings.tokens_per_batch,
        device=resolve_device(args.device),
        encodings=tuple(args.encodings.split(",")) if args.encodings else None,
        peer=not args.no_peer,
    )
    if settings.rounds < 1 or settings.tokens_per_batch < 1:
        raise ValueError(f"--rounds and --tokens must be at least 1; got {settings.rounds} and {settings.tokens_per_batch}")
    return settings
