"""The ``pebench`` command: ``run``, ``evaluate``, ``sweep``, ``list``, ``report``, ``bench``.

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
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from tabulate import tabulate

from pebench import __version__
from pebench.analysis.sections import refresh_sections
from pebench.bench import throughput as bench
from pebench.config.cards import encoding_cards, suite_of, task_cards
from pebench.core.metrics import METRICS
from pebench.core.registry import PluginConflictError, UnknownNameError
from pebench.records.paths import RUNS, USER_RESULTS, committed_results, leaderboards_dir, record_files, runs_dir
from pebench.records.store import check_writable, load_records
from pebench.records.types import ABSENT, RunRecord
from pebench.running import checkpoints, execution, sweep
from pebench.running.devices import resolve_device
from pebench.running.distributed import finish, from_environment
from pebench.running.engines import ENGINES, EngineOptions
from pebench.tasks.base import LengthBucket
from pebench.tasks.data import DATA_ENV

RESULTS_HELP = (
    f"results folder: runs/ (the records), leaderboards/ and throughput/ (default: ./{USER_RESULTS}; "
    "the committed grid, tables and benchmark: --results results)"
)
BASELINE_DEFAULT = Path("<committed results>")  # --baseline without DIR
THREADS_HELP = (
    "CPU threads of torch's operations (default: torch's own, the cores; recorded in each run): the order of "
    "floating-point sums, so a run's numbers, depend on it"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pebench", description="Length-extrapolation benchmark of positional encodings.")
    parser.add_argument("--version", action="version", version=f"pebench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run_parser = commands.add_parser("run", help="train and evaluate one (task, encoding, seed)")
    run_parser.add_argument("--encoding", required=True, help="encoding card or plugin name (see `pebench list`)")
    run_parser.add_argument("--task", required=True, help="task card name (see `pebench list`)")
    run_parser.add_argument("--seed", type=int, default=0)
    run_parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:N")
    run_parser.add_argument("--results", type=Path, default=USER_RESULTS, help=RESULTS_HELP)
    run_parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a card value: training.steps=200, model.d_model=128, encoding.delta=0.05",
    )
    run_parser.add_argument("--data-dir", type=Path, help=f"folder of real datasets (default: ${DATA_ENV}, else the Hugging Face hub)")
    run_parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    run_parser.add_argument("--threads", type=int, help=THREADS_HELP)
    run_parser.add_argument("--save-checkpoint", action="store_true", help="keep the trained weights (<results>/checkpoints/...), for pebench evaluate")
    run_parser.add_argument("--log", choices=execution.LOGGERS, help="also log the training curve: tensorboard (<results>/tensorboard/...)")

    evaluate_parser = commands.add_parser("evaluate", help="score a saved model again at other lengths or decoding settings")
    evaluate_parser.add_argument("record", type=Path, help="the run record of a run made with --save-checkpoint")
    evaluate_parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="split.buckets, split.eval_examples, split.eval_seed or decoding.*, e.g. 'split.buckets=[[1,16],[65,128]]'",
    )
    evaluate_parser.add_argument("--results", type=Path, default=USER_RESULTS, help=RESULTS_HELP)
    evaluate_parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:N")
    evaluate_parser.add_argument("--data-dir", type=Path, help=f"folder of real datasets (default: ${DATA_ENV}, else the Hugging Face hub)")
    evaluate_parser.add_argument("--threads", type=int, help=THREADS_HELP)

    commands.add_parser("list", help="list encodings and tasks")

    report_parser = commands.add_parser("report", help="leaderboards from the run records")
    report_parser.add_argument("--results", dest="results_option", type=Path, help=RESULTS_HELP)
    report_parser.add_argument("results", nargs="?", type=Path, default=USER_RESULTS, help="the results folder, as --results")
    report_parser.add_argument("--out", type=Path, help="where to write the tables (default: <results>/leaderboards)")
    report_parser.add_argument(
        "--readme",
        type=Path,
        nargs="+",
        metavar="MARKDOWN",
        help="then refresh these documents' '<!-- generated: PATH -->' sections (PATH relative to each) from the written tables",
    )
    report_parser.add_argument(
        "--baseline",
        nargs="?",
        const=BASELINE_DEFAULT,
        type=Path,
        metavar="DIR",
        help="compare your encodings with the records of this results folder (read only; without DIR: the committed results/ of this "
        "checkout), pooled at identical task cards: comparison.md beside the tables",
    )
    report_parser.add_argument("--encodings", help="comma-separated encodings: report only their runs (default: every encoding)")
    report_parser.add_argument("--highlight", default="", help="comma-separated encodings to mark in the tables and draw bold in the figures")
    plan_parser = commands.add_parser("plan", help="the seeds each validity claim's pairs need for 80%% power, and the sweeps that run them")
    plan_parser.add_argument("results", nargs="?", type=Path, default=USER_RESULTS, help="the results folder (default: %(default)s)")

    sweep_parser = commands.add_parser("sweep", help="run a grid of tasks x encodings x seeds; resumable")
    sweep_parser.add_argument("--encodings", default="all", help="comma-separated encodings, or all (default)")
    sweep_parser.add_argument("--tasks", default="all", help="comma-separated tasks or suites (chomsky, synthetic, real, arithmetic), or all (default)")
    sweep_parser.add_argument("--seeds", default="0", help="seeds: 0,1,2 or 0-2 (default 0)")
    sweep_parser.add_argument("--retry-failed", action="store_true", help="run again the cells whose record says failed")
    sweep_parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:N")
    sweep_parser.add_argument("--results", type=Path, default=USER_RESULTS, help=RESULTS_HELP)
    sweep_parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a card value in every run")
    sweep_parser.add_argument("--data-dir", type=Path, help=f"folder of real datasets (default: ${DATA_ENV}, else the Hugging Face hub)")
    sweep_parser.add_argument("--quiet", action="store_true", help="no progress bars (there are none when stderr is not a terminal)")
    sweep_parser.add_argument("--threads", type=int, help=THREADS_HELP)
    sweep_parser.add_argument("--save-checkpoints", action="store_true", help="keep every run's trained weights (off by default: they take space)")
    scale = sweep_parser.add_argument_group("engines", "where the runs execute (see README, Scaling out)")
    scale.add_argument("--engine", default="local", choices=ENGINES, help="local (one after another, here), ray (Ray tasks) or slurm (a submitit job array)")
    scale.add_argument("--cpus-per-run", type=int, default=1, help="ray, slurm: CPUs (torch threads) of each run (default 1)")
    scale.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="ray: GPUs of each run, fractions allowed (0.25: four runs share a GPU); slurm: whole GPUs"
    )
    scale.add_argument("--address", help="ray: the address of a running cluster (default: a local Ray instance)")
    scale.add_argument("--partition", help="slurm: the partition")
    scale.add_argument("--time", type=int, default=60, help="slurm: each job's time limit in minutes (default 60)")
    scale.add_argument("--slurm-cluster", default="slurm", choices=("slurm", "local", "debug"), help=argparse.SUPPRESS)  # submitit's test executors

    bench_parser = commands.add_parser("bench", help="throughput of every encoding, side by side in one process")
    bench.add_arguments(bench_parser)
    return parser


def command_run(args) -> int:
    if args.data_dir:
        os.environ[DATA_ENV] = str(args.data_dir)
    try:
        distributed, device = from_environment(args.device)  # a torchrun job, or this process alone
        main = distributed is None or distributed.is_main
        planned = execution.plan(args.task, args.encoding, args.seed, args.overrides, args.results)
        if main:
            where = f", {distributed.world_size} processes ({distributed.backend})" if distributed else ""
            print(f"pebench run: task {planned.task['name']}, encoding {planned.encoding['name']}, seed {args.seed}, device {device}{where}", file=sys.stderr)
        setup, data_seconds = execution.prepare(planned)
        if main:
            check_writable(args.results)
    except execution.BAD_INPUT as error:
        return _fail(error)
    if planned.protocol.task.data and main:
        print(f"data: {', '.join(f'{k} {v}' for k, v in planned.protocol.task.data.items())}", file=sys.stderr)
    record = execution.execute(planned, setup, device, not args.quiet and main, data_seconds, args.save_checkpoint, distributed, args.log)
    finish(distributed)
    if not main:
        return 0
    if record.status != "ok":
        error = record.error
        print(f"pebench: run failed: {error['type']}: {error['message']}\nrecord: {planned.path}", file=sys.stderr)
        return 1
    _print_run(record, planned.path)
    return 0


def command_evaluate(args) -> int:
    if args.data_dir:
        os.environ[DATA_ENV] = str(args.data_dir)
    try:
        device = resolve_device(args.device)
        check_writable(args.results)
        tick = time.perf_counter()
        record, path = checkpoints.rescore(args.record, args.overrides, args.results, device)
    except execution.BAD_INPUT as error:
        return _fail(error)
    _print_run(record, path)
    print(f"scored from {record.evaluated_from['checkpoint']} in {time.perf_counter() - tick:.1f} s, without training")
    return 0


def _print_run(record: RunRecord, path: Path) -> None:
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
        f"\ntraining: {training.steps} of at most {training.step_cap} steps ({stop}) in {training.wall_seconds:.0f} s, "
        f"{training.tokens_per_second:,.0f} tok/s, final loss {training.final_loss:.4f}, "
        f"peak memory {training.peak_memory_mb:.0f} MB ({training.memory_kind})"
    )
    print(f"parameters: {parameters['total']:,} total, {parameters['encoding']:,} in the encoding")
    print(f"record: {path}")


def command_list(args) -> int:
    encodings = [[name, card["plugin"], card["description"], card["reference"]] for name, card in encoding_cards().items()]
    print(tabulate(encodings, headers=["encoding", "plugin", "description", "reference"]))
    cards = sorted(task_cards().items(), key=lambda item: (suite_of(item[0]), item[0]))
    tasks = [
        [
            suite_of(name),
            name,
            card["model"]["architecture"],
            f"{LengthBucket(*card['split']['train']).label} {card['split'].get('unit', '')}",
            card["metrics"]["primary"],
            card["description"],
        ]
        for name, card in cards
    ]
    print()
    print(tabulate(tasks, headers=["suite", "task", "model", "train lengths", "primary", "description"]))
    print("\n(a suite's name selects its tasks: pebench sweep --tasks chomsky)")
    return 0


def written(printed: dict[str, str], out: Path) -> str:
    """What ``pebench report`` wrote: its tables by name, and the sections present in ``out``."""
    tables = [name for name in printed if name not in ("overall", "legend", "comparison")]
    parts = [f"{len(tables)} task table{'s' if len(tables) != 1 else ''} ({', '.join(tables)}: .md, .csv, .tex, .html, .png)"]
    parts += [f"{name}.*" for name in ("overall", "chomsky") if (out / f"{name}.md").is_file()]
    parts += [name for name in ("validity.md", "runtime.md", "legend.md", "comparison.md") if (out / name).is_file()]
    return ", ".join(parts)


def command_plan(args) -> int:
    records, skipped = load_records(args.results)
    for path, reason in skipped:
        print(f"pebench plan: skipping {path}: {reason}", file=sys.stderr)
    from pebench.analysis.frames import tables
    from pebench.analysis.validity import render_plan

    print(render_plan(tables([record for record in records if record.status == "ok"])), end="")
    return 0


def command_report(args) -> int:
    args.results = args.results_option or args.results
    for document in args.readme or []:
        if not document.is_file():
            return _fail(FileNotFoundError(f"--readme {document}: no such file"))
    records, skipped = load_records(args.results)
    for path, reason in skipped:
        print(f"pebench report: skipping {path}: {reason}", file=sys.stderr)
    if not any(record.status == "ok" for record in records):
        hint = "run `pebench run --encoding E --task T` first"
        if record_files(args.results.parent) and args.results.name == RUNS:  # given the runs/ folder itself
            hint = f"{args.results} is a runs/ folder: give the results folder that holds it, `pebench report {args.results.parent}`"
        return _fail(FileNotFoundError(f"no successful run records under {runs_dir(args.results)}; {hint}"))
    from pebench.analysis.report import write_reports  # pandas and scipy: seconds of start-up that only the report needs

    out = args.out or leaderboards_dir(args.results)
    comparison = None
    if args.baseline is not None:
        try:
            records, comparison = _with_baseline(records, args.baseline, args.results)
        except (FileNotFoundError, ValueError) as error:
            return _fail(error)
    if args.encodings:
        try:
            records = _only_encodings(records, args.encodings)
        except ValueError as error:
            return _fail(error)
    highlight = frozenset(_listed(args.highlight))
    printed = write_reports(records, out, bench.load(args.results), highlight)
    if comparison is not None:
        (out / "comparison.md").write_text(comparison)
        printed["comparison"] = comparison
    for text in printed.values():
        print(text)
    print(f"written to {out}: {written(printed, out)}")
    for document in args.readme or []:
        try:
            refreshed = refresh_sections(document)
        except (OSError, ValueError) as error:
            return _fail(type(error)(f"the tables are written, {document} is unchanged: {error}"))
        print(f"refreshed in {document}: " + ", ".join(refreshed))
        if not any((document.parent / path).resolve().is_relative_to(out.resolve()) for path in refreshed):
            print(
                f"pebench report: warning: no generated section of {document} names a file under {out}: its tables are not the ones just written",
                file=sys.stderr,
            )
    return 0


def _listed(names: str) -> list[str]:
    """The names of a comma-separated list, blanks left out."""
    return [name.strip() for name in names.split(",") if name.strip()]


def _only_encodings(records: list[RunRecord], requested: str) -> list[RunRecord]:
    """The records of the encodings named in ``requested`` (comma-separated).

    Raises:
        ValueError: for a name no successful record has (listing the ones there are).
    """
    wanted = set(_listed(requested))
    present = {r.encoding["name"] for r in records if r.status == "ok"}
    if not wanted or wanted - present:
        raise ValueError(f"--encodings {requested}: no run of {', '.join(sorted(wanted - present)) or 'any'}; the records have {', '.join(sorted(present))}")
    return [r for r in records if r.encoding.get("name") in wanted]


def _with_baseline(records: list[RunRecord], baseline: Path, results: Path) -> tuple[list[RunRecord], str]:
    """The user's records pooled with the baseline folder's (:func:`pebench.analysis.comparison.pool`),
    and the comparison's Markdown; the baseline folder is only read.

    Raises:
        FileNotFoundError: for a baseline folder without records (or none committed here).
        ValueError: from :func:`pebench.analysis.comparison.pool`.
    """
    from pebench.analysis.comparison import pool, render_comparison

    if baseline == BASELINE_DEFAULT:
        baseline = committed_results()
        if baseline is None:
            raise FileNotFoundError("--baseline without DIR reads the committed results/ of a pebench checkout, and this install has none: give --baseline DIR")
    if Path(baseline).resolve() == Path(results).resolve():
        raise ValueError(f"--baseline {baseline} is the results folder itself: give your own --results folder, and the baseline apart")
    found, skipped = load_records(baseline)
    for path, reason in skipped:
        print(f"pebench report: skipping {path}: {reason}", file=sys.stderr)
    if not found:
        raise FileNotFoundError(f"--baseline {baseline}: no run records under {runs_dir(baseline)}")
    pooled = pool(records, found)
    return pooled.records, render_comparison(pooled, str(baseline))


def command_sweep(args) -> int:
    if args.data_dir:
        os.environ[DATA_ENV] = str(args.data_dir)
    try:
        tasks = sweep.names(args.tasks, task_cards(), "tasks")
        encodings = sweep.names(args.encodings, encoding_cards(), "encodings")
        cells = sweep.plan_grid(tasks, encodings, sweep.seeds(args.seeds), args.overrides, args.results)
        options = EngineOptions(
            args.engine, args.device, args.cpus_per_run, args.gpus_per_run, args.address, args.partition, args.time, args.slurm_cluster, args.save_checkpoints
        )
        device = resolve_device(args.device) if args.engine == "local" else args.device  # elsewhere each worker resolves it
        check_writable(args.results)
    except execution.BAD_INPUT as error:
        return _fail(error)
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


def command_bench(args) -> int:
    try:
        settings = bench.settings_from(args)
        chosen = bench.contenders(settings)
    except (UnknownNameError, ValueError, RuntimeError) as error:
        return _fail(error)
    names = ", ".join(c.name for c in chosen)
    print(f"pebench bench: {len(chosen)} contenders ({names}) on {', '.join(map(str, settings.shapes))}, device {settings.device}", file=sys.stderr)
    out, command = bench.output_folder(args), " ".join(["pebench", *args.argv])
    partial = out / "partial"  # the shapes timed so far; out's own tables are replaced only by a whole run's
    table = bench.run_benchmark(
        settings, chosen, progress=lambda message: print(message, file=sys.stderr), shape_done=lambda so_far: bench.write(so_far, settings, partial, command)
    )
    print(bench.render(table, "simple"))
    written = bench.write(table, settings, out, command)
    shutil.rmtree(partial, ignore_errors=True)
    print(f"written: {', '.join(map(str, written))}")
    return 0


def _fail(error: Exception) -> int:
    print(f"pebench: error: {error}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    args.argv = argv
    if getattr(args, "threads", None) is not None:
        if args.threads < 1:
            return _fail(ValueError(f"--threads must be at least 1; got {args.threads}"))
        torch.set_num_threads(args.threads)
    # Denormal floats (below 1.2e-38) flush to zero on the CPU, as numerical libraries commonly
    # set: x86 cores take a slow path for every denormal operand, and gradients that shrink into
    # that range (a softmax saturated by FLOATER's large position biases at initialisation) slowed
    # whole matrix products 2x in our profiles. The flag is per thread, and torch's worker threads
    # copy it when they start, so it is set here, before any torch work starts them.
    torch.set_flush_denormal(True)
    try:
        commands = {
            "run": command_run,
            "evaluate": command_evaluate,
            "list": command_list,
            "report": command_report,
            "plan": command_plan,
            "bench": command_bench,
            "sweep": command_sweep,
        }
        return commands[args.command](args)
    except BrokenPipeError:  # `pebench list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except PluginConflictError as error:  # found when plugins are first listed, by any command
        return _fail(error)
    except KeyboardInterrupt:  # Ctrl-C: the run in progress is not recorded (records are written whole, at its end)
        print(f"\npebench {args.command}: interrupted; nothing was written for the work in progress", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
