"""The ``pebench`` command: ``run``, ``list``, ``report``.

Bad input (an unknown encoding or task, an impossible length split, a malformed ``--set``)
exits with status 2 and a message saying what to do, before anything is trained or written.
A run that fails while training or evaluating is recorded as ``failed`` with its error and
exits with status 1. Ctrl-C writes nothing: no partial record.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from tabulate import tabulate

from . import __version__
from .cards import apply_overrides, encoding_card, encoding_cards, task_card, task_cards
from .data import DATA_ENV, DataNotFoundError
from .protocol import resolve
from .records import load_records, new_record, record_path, to_frame, write_record
from .registry import UnknownNameError
from .report import write_reports
from .train import resolve_device, run, set_up


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pebench", description="Length-extrapolation benchmark of positional encodings.")
    parser.add_argument("--version", action="version", version=f"pebench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run_parser = commands.add_parser("run", help="train and evaluate one (task, encoding, seed)")
    run_parser.add_argument("--encoding", required=True, help="encoding card or plugin name (see `pebench list`)")
    run_parser.add_argument("--task", required=True, help="task card name (see `pebench list`)")
    run_parser.add_argument("--seed", type=int, default=0)
    run_parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:N")
    run_parser.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: ./results)")
    run_parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                            help="override a card value: training.steps=200, model.d_model=128, encoding.delta=0.05")
    run_parser.add_argument("--data-dir", type=Path, help=f"folder of real datasets (default: ${DATA_ENV}, else the Hugging Face hub)")
    run_parser.add_argument("--quiet", action="store_true", help="no progress bar")

    commands.add_parser("list", help="list encodings and tasks")

    report_parser = commands.add_parser("report", help="leaderboards from the run records")
    report_parser.add_argument("results", nargs="?", type=Path, default=Path("results"), help="results folder (default: ./results)")
    report_parser.add_argument("--out", type=Path, help="where to write the tables (default: <results>/leaderboards)")
    return parser


def command_run(args) -> int:
    if args.data_dir:
        os.environ[DATA_ENV] = str(args.data_dir)
    started = time.perf_counter()
    try:
        task, encoding = task_card(args.task), encoding_card(args.encoding)
        apply_overrides(task, encoding, args.overrides)
        device = resolve_device(args.device)
        print(f"pebench run: task {task['name']}, encoding {encoding['name']}, seed {args.seed}, device {device}", file=sys.stderr)
        protocol = resolve(task)
        setup = set_up(protocol, encoding, args.seed)
    except (UnknownNameError, ValueError, TypeError, RuntimeError, DataNotFoundError) as error:
        return _fail(error)
    if protocol.task.data:
        print(f"data: {', '.join(f'{k} {v}' for k, v in protocol.task.data.items())}", file=sys.stderr)
    path = record_path(args.results, task["name"], encoding["name"], args.seed, args.overrides)
    record = new_record(task, encoding, args.seed, args.overrides)
    data_seconds = round(time.perf_counter() - started, 2)
    try:
        record.update(run(protocol, setup, args.seed, device, progress=not args.quiet))
        record["stages"] = {"data_seconds": data_seconds, **record["stages"]}
        record["status"] = "ok"
    except Exception as error:  # recorded, so a sweep can go on; Ctrl-C is not caught
        record.update(status="failed", error={"type": type(error).__name__, "message": str(error), "traceback": traceback.format_exc()})
        write_record(path, record)
        print(f"pebench: run failed: {type(error).__name__}: {error}\nrecord: {path}", file=sys.stderr)
        return 1
    write_record(path, record)
    _print_run(record, path)
    return 0


def _print_run(record: dict, path: Path) -> None:
    metrics = record["task"]["metrics"]["names"]
    rows = [
        [b["bucket"], "ID" if b["in_distribution"] else "OOD", b["n"], *[(b["metrics"] or {}).get(m, "—") for m in metrics],
         f"{b['eval_tokens_per_second']:,.0f}" if b["eval_tokens_per_second"] else b.get("error", "—")]
        for b in record["buckets"]
    ]
    print(tabulate(rows, headers=["bucket", "split", "n", *metrics, "eval tok/s"], floatfmt=".3f"))
    training, parameters = record["training"], record["parameters"]
    print(f"\ntraining: {training['steps']} steps in {training['wall_seconds']:.0f} s, {training['tokens_per_second']:,.0f} tok/s, "
          f"final loss {training['final_loss']:.4f}, peak memory {training['peak_memory_mb']:.0f} MB ({training['memory_kind']})")
    if "corpus" in record:
        corpus = record["corpus"]
        scores = ", ".join(f"{name} {value:.2f}" for name, value in corpus["metrics"].items())
        print(f"whole evaluation set ({corpus['n']} examples): {scores}; " + "; ".join(f"{k}: {v}" for k, v in corpus["signatures"].items()))
    print(f"parameters: {parameters['total']:,} total, {parameters['encoding']:,} in the encoding")
    print(f"record: {path}")


def command_list(args) -> int:
    encodings = [[name, card["plugin"], card["description"], card["reference"]] for name, card in encoding_cards().items()]
    print(tabulate(encodings, headers=["encoding", "plugin", "description", "reference"]))
    tasks = [[name, card["family"], f"{card['split']['train'][0]}-{card['split']['train'][1]} {card['split'].get('unit', '')}",
              card["metrics"]["primary"], card["description"]] for name, card in task_cards().items()]
    print()
    print(tabulate(tasks, headers=["task", "family", "train lengths", "primary", "description"]))
    return 0


def command_report(args) -> int:
    frame = to_frame(load_records(args.results))
    if frame.empty:
        return _fail(FileNotFoundError(f"no complete run records under {args.results / 'runs'}; run `pebench run --encoding E --task T` first"))
    out = args.out or args.results / "leaderboards"
    for text in write_reports(frame, out).values():
        print(text)
    print(f"written: {out}/<task>.md and .csv")
    return 0


def _fail(error: Exception) -> int:
    print(f"pebench: error: {error}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"run": command_run, "list": command_list, "report": command_report}[args.command](args)
    except BrokenPipeError:  # `pebench list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
