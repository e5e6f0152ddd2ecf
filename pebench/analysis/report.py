"""``pebench report``: every table, figure and section of a results folder (:mod:`pebench.analysis.tables`,
:mod:`pebench.analysis.plots`, :mod:`pebench.analysis.validity`), written all or nothing."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from pebench.analysis.frames import Frames, frames, legend
from pebench.analysis.leaderboards import boards_of, overall_groups, ranked_runs, suite_scores
from pebench.analysis.plots import plot, plot_curves, plot_grid, plot_positions
from pebench.analysis.tables import (
    CHOMSKY_TITLE,
    FORMATS,
    overall_csv,
    render,
    render_latex,
    render_overall,
    render_overall_latex,
    render_run_times,
    render_suite,
)
from pebench.analysis.validity import validity_section
from pebench.config.cards import suite_levels
from pebench.records.types import RunRecord
from pebench.records.versions import RANKED_PROTOCOL


def report_name(runs: pd.DataFrame) -> str:
    """The file name of a table: its task label, ``.protocol1`` for protocol 1 records."""
    return runs["table"].iloc[0] + (".protocol1" if runs["protocol"].iloc[0] == 1 else "")


def write_reports(records: list[RunRecord], out: Path, throughput: pd.DataFrame | None = None, highlight: frozenset[str] = frozenset()) -> dict[str, str]:
    """Write, for every table, ``<out>/<name>.{md,html}`` (the rendered leaderboards), ``<name>.tex``
    (the primary metric's, one LaTeX table, :func:`pebench.analysis.tables.render_latex`),
    ``<name>.csv`` (every metric, a ``metric`` column), ``<name>.png`` and, for a grid task, its
    heat maps ``<name>.grid.png``; ``overall.*``; the
    legend of configuration labels (``legend.md``) when there are any; the validity section
    (``validity.md``); the run time per task (``runtime.md``, :func:`run_times`); and, when
    there are Chomsky runs, their matrix (``chomsky.md`` and ``.csv``, :func:`suite_scores`).
    All or nothing: the files are made in a folder beside ``out`` that replaces it whole, so a failure leaves the last report as it was. Returns the terminal
    rendering of each table. ``highlight``: encodings marked in the tables and drawn bold in the
    figures.

    Raises:
        ValueError: if no record is a successful run.
    """
    table = frames(records)
    if table.runs.empty:
        raise ValueError("no successful run among the records")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        printed = _write_all(table, records, staging, throughput, highlight)
        (staging / "validity.md").write_text(validity_section(table))
        (staging / "runtime.md").write_text(render_run_times(table))
        chomsky = suite_scores(table, suite_levels("chomsky"))
        if not chomsky.empty:
            (staging / "chomsky.md").write_text(render_suite(chomsky, CHOMSKY_TITLE))
            chomsky.to_csv(staging / "chomsky.csv", index=False, float_format="%.6g")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _replace_folder(staging, out)
    return printed


def _write_all(table: Frames, records: list[RunRecord], out: Path, throughput: pd.DataFrame | None, highlight: frozenset[str]) -> dict[str, str]:
    printed = {}
    for _, runs in sorted(table.runs.groupby(["table", "protocol"]), key=lambda item: (item[0][1] != RANKED_PROTOCOL, item[0][0])):
        name = report_name(runs)
        boards = boards_of(table, runs, throughput)
        for suffix, table_format in FORMATS.items():
            (out / f"{name}.{suffix}").write_text(render(name, table, runs, boards, table_format, highlight))
        (out / f"{name}.tex").write_text(render_latex(name, table, runs, boards, highlight))
        frame = pd.concat([board.assign(metric=metric) for metric, board in boards.items()], ignore_index=True)
        frame[["metric", *frame.columns[:-1]]].to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
        plot(name, table, runs, out / f"{name}.png", highlight)
        if table.curves.run.isin(runs.run).any():
            plot_curves(name, table, runs, out / f"{name}.curves.png")
        if table.positions.run.isin(runs.run).any():
            plot_positions(name, table, runs, out / f"{name}.positions.png")
        if table.cells.run.isin(runs.run).any():
            plot_grid(name, table, runs, out / f"{name}.grid.png")
        printed[name] = render(name, table, runs, boards, "simple", highlight)
    ranked = ranked_runs(table)
    if not ranked.empty:
        blocks, encodings = overall_groups(table), sorted(ranked.encoding.unique())
        for suffix, table_format in FORMATS.items():
            (out / f"overall.{suffix}").write_text(render_overall(blocks, encodings, table_format))
        if blocks:
            (out / "overall.tex").write_text(render_overall_latex(blocks, highlight))
        overall_csv(blocks).to_csv(out / "overall.csv", index=False, float_format="%.6g")
        printed["overall"] = render_overall(blocks, encodings, "simple")
    labels = legend(records)
    if labels:
        rows = [[label, ", ".join(f"{key}={value}" for key, value in settings.items())] for label, settings in labels.items()]
        (out / "legend.md").write_text(
            "Configuration labels: the settings that differ from the cards\n\n" + tabulate(rows, ["label", "settings"], tablefmt="github") + "\n"
        )
        printed["legend"] = tabulate(rows, ["label", "settings"])
    return printed


def _replace_folder(new: Path, out: Path) -> None:
    """Put the folder ``new`` at ``out``, moving the old one aside first and removing it after."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        out.rename(old / out.name)
    new.rename(out)
    if old is not None:
        shutil.rmtree(old)
