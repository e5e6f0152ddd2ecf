"""``pebench report``: the leaderboards, figures and validity tables from the run records of a
results folder (:func:`pebench.analysis.report.write_reports`); optionally compared with another
folder's records (``--baseline``) and copied into the generated sections of Markdown documents
(``--readme``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pebench.analysis.sections import refresh_sections
from pebench.bench import throughput
from pebench.cli.errors import fail
from pebench.cli.options import add_results
from pebench.records.paths import RUNS, USER_RESULTS, committed_results, leaderboards_dir, record_files, runs_dir
from pebench.records.store import load_records
from pebench.records.types import RunRecord

HELP = "leaderboards from the run records"
BASELINE_DEFAULT = Path("<committed results>")  # --baseline without DIR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_results(parser, dest="results_option", default=None)
    parser.add_argument("results", nargs="?", type=Path, default=USER_RESULTS, help="the results folder, as --results")
    parser.add_argument("--out", type=Path, help="where to write the tables (default: <results>/leaderboards)")
    parser.add_argument(
        "--readme",
        type=Path,
        nargs="+",
        metavar="MARKDOWN",
        help="then refresh these documents' '<!-- generated: PATH -->' sections (PATH relative to each) from the written tables",
    )
    parser.add_argument(
        "--baseline",
        nargs="?",
        const=BASELINE_DEFAULT,
        type=Path,
        metavar="DIR",
        help="compare your encodings with the records of this results folder (read only; without DIR: the committed results/ of this "
        "checkout), pooled at identical task cards: comparison.md beside the tables",
    )
    parser.add_argument("--encodings", help="comma-separated encodings: report only their runs (default: every encoding)")
    parser.add_argument("--highlight", default="", help="comma-separated encodings to mark in the tables and draw bold in the figures")


def command(args: argparse.Namespace) -> int:
    """Exit status 0 (the tables are written) or 2 (no successful record, a bad option, a document
    that cannot be refreshed)."""
    args.results = args.results_option or args.results
    for document in args.readme or []:
        if not document.is_file():
            return fail(FileNotFoundError(f"--readme {document}: no such file"))
    records, skipped = load_records(args.results)
    for path, reason in skipped:
        print(f"pebench report: skipping {path}: {reason}", file=sys.stderr)
    if not any(record.status == "ok" for record in records):
        hint = "run `pebench run --encoding E --task T` first"
        if record_files(args.results.parent) and args.results.name == RUNS:  # given the runs/ folder itself
            hint = f"{args.results} is a runs/ folder: give the results folder that holds it, `pebench report {args.results.parent}`"
        return fail(FileNotFoundError(f"no successful run records under {runs_dir(args.results)}; {hint}"))
    from pebench.analysis.report import write_reports  # pandas and scipy: seconds of start-up that only the report needs

    out = args.out or leaderboards_dir(args.results)
    comparison = None
    if args.baseline is not None:
        try:
            records, comparison = _with_baseline(records, args.baseline, args.results)
        except (FileNotFoundError, ValueError) as error:
            return fail(error)
    if args.encodings:
        try:
            records = _only_encodings(records, args.encodings)
        except ValueError as error:
            return fail(error)
    highlight = frozenset(_listed(args.highlight))
    printed = write_reports(records, out, throughput.load(args.results), highlight)
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
            return fail(type(error)(f"the tables are written, {document} is unchanged: {error}"))
        print(f"refreshed in {document}: " + ", ".join(refreshed))
        if not any((document.parent / path).resolve().is_relative_to(out.resolve()) for path in refreshed):
            print(
                f"pebench report: warning: no generated section of {document} names a file under {out}: its tables are not the ones just written",
                file=sys.stderr,
            )
    return 0


def written(printed: dict[str, str], out: Path) -> str:
    """What ``pebench report`` wrote: its tables by name, and the sections present in ``out``."""
    tables = [name for name in printed if name not in ("overall", "legend", "comparison")]
    parts = [f"{len(tables)} task table{'s' if len(tables) != 1 else ''} ({', '.join(tables)}: .md, .csv, .tex, .html, .png)"]
    parts += [f"{name}.*" for name in ("overall", "chomsky") if (out / f"{name}.md").is_file()]
    parts += [name for name in ("validity.md", "runtime.md", "legend.md", "comparison.md") if (out / name).is_file()]
    return ", ".join(parts)


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
