"""Leaderboards from run records: one per task, printed and written as Markdown and CSV.

For every encoding (configuration) of a task, over its seeds, for the primary metric (and in
smaller tables, for each other metric the task reports):
- *ID score*: the metric on the in-distribution bucket;
- each OOD bucket's value, and the *OOD score*: their mean, buckets weighted equally;
- *extrapolation ratio*: mean OOD score / mean ID score;
- training and evaluation tokens/s (median over seeds) and the training throughput relative to
  NoPE's on the same task and configuration (> 1 is faster);
- the encoding's own parameter count.
Scores are mean ± sample standard deviation over seeds; rows are sorted by OOD score.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tabulate import tabulate

from .protocol import METRICS

THROUGHPUT_COLUMNS = ["train tok/s", "eval tok/s", "train vs NoPE", "PE params"]


def _per_run(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per (encoding, seed): ID, OOD score and every bucket's value of ``metric``."""
    keys = ["encoding", "seed"]
    wide = frame.pivot_table(index=keys, columns="bucket", values=metric, aggfunc="first", dropna=False)
    ood_labels = list(dict.fromkeys(frame.loc[~frame.in_distribution, "bucket"]))
    id_label = frame.loc[frame.in_distribution, "bucket"].iloc[0]
    runs = pd.DataFrame({"ID": wide[id_label]})
    for label in ood_labels:
        runs[label] = wide[label]
    runs["OOD"] = wide[ood_labels].mean(axis=1, skipna=False) if ood_labels else float("nan")
    speed = frame.groupby(keys)[["train_tokens_per_second", "eval_tokens_per_second", "encoding_parameters"]].agg(
        {"train_tokens_per_second": "first", "eval_tokens_per_second": "median", "encoding_parameters": "first"}
    )
    return runs.join(speed).reset_index()


def leaderboard(frame: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """The numeric leaderboard of one task's rows of :func:`pebench.records.to_frame`, for
    ``metric`` (default: the task's primary metric)."""
    runs = _per_run(frame, metric or frame["primary_metric"].iloc[0])
    scores = [c for c in runs.columns if c not in ("encoding", "seed", "train_tokens_per_second", "eval_tokens_per_second", "encoding_parameters")]
    grouped = runs.groupby("encoding")
    board = pd.DataFrame({"seeds": grouped.size()})
    for column in scores:
        board[f"{column} mean"] = grouped[column].mean()
        board[f"{column} std"] = grouped[column].std()
    board["OOD/ID"] = board["OOD mean"] / board["ID mean"].where(board["ID mean"] > 0)
    board["train tok/s"] = grouped["train_tokens_per_second"].median()
    board["eval tok/s"] = grouped["eval_tokens_per_second"].median()
    board["train speed vs NoPE"] = [board["train tok/s"][name] / _nope_speed(board["train tok/s"], name) for name in board.index]
    board["PE params"] = grouped["encoding_parameters"].first()
    return board.sort_values(["OOD mean", "ID mean"], ascending=False).reset_index()


def _nope_speed(speeds: pd.Series, encoding: str) -> float:
    """NoPE's training tokens/s in the same configuration (same ``@<overrides>`` suffix) when
    present, else the card's own NoPE run, else NaN."""
    _, sep, config = encoding.partition("@")
    return speeds.get(f"nope{sep}{config}", speeds.get("nope", float("nan")))


def _mean_std(mean: float, std: float) -> str:
    if pd.isna(mean):
        return "—"
    return f"{mean:.3f}" if pd.isna(std) else f"{mean:.3f} ± {std:.3f}"


def display(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard with scores as ``mean ± std`` strings, for printing."""
    shown = pd.DataFrame({"encoding": board["encoding"]})
    for column in board.columns:
        if column.endswith(" mean"):
            name = column[: -len(" mean")]
            shown[name] = [_mean_std(m, s) for m, s in zip(board[column], board[f"{name} std"])]
    shown["OOD/ID"] = board["OOD/ID"].map(lambda v: "—" if pd.isna(v) else f"{v:.3f}")
    shown["train tok/s"] = board["train tok/s"].map(lambda v: f"{v:,.0f}")
    shown["eval tok/s"] = board["eval tok/s"].map(lambda v: "—" if pd.isna(v) else f"{v:,.0f}")
    shown["train vs NoPE"] = board["train speed vs NoPE"].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    shown["PE params"] = board["PE params"].map(lambda v: f"{v:,}")
    shown["seeds"] = board["seeds"]
    return shown


def metrics_of(frame: pd.DataFrame) -> list[str]:
    """The task's primary metric, then its other metrics present in the records."""
    primary = frame["primary_metric"].iloc[0]
    return [primary] + [m for m in METRICS if m != primary and m in frame.columns and frame[m].notna().any()]


def render(task: str, frame: pd.DataFrame, table_format: str) -> str:
    """A task's titled leaderboards in a tabulate format ("github", "simple", ...): the primary
    metric with throughput, then each other metric's scores."""
    id_label = frame.loc[frame.in_distribution, "bucket"].iloc[0]
    sizes = ", ".join(f"{bucket} n={n}" for bucket, n in frame.groupby("bucket", sort=False)["n"].first().items())
    parts = []
    for index, metric in enumerate(metrics_of(frame)):
        shown = display(leaderboard(frame, metric))
        if index:
            shown = shown.drop(columns=THROUGHPUT_COLUMNS)
        table = tabulate(shown, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)
        parts.append(f"{task}: {metric} per length bucket (ID = {id_label}; {sizes}), mean ± std over seeds\n\n{table}\n")
    return "\n".join(parts)


def write_reports(frame: pd.DataFrame, out: Path) -> dict[str, str]:
    """Write ``<out>/<task>.md`` and ``<out>/<task>.csv`` (every metric, a ``metric`` column)
    for every task; return the terminal rendering of each task's leaderboards."""
    out.mkdir(parents=True, exist_ok=True)
    printed = {}
    for task, rows in frame.groupby("task", sort=True):
        (out / f"{task}.md").write_text(f"## {render(task, rows, 'github')}")
        boards = [leaderboard(rows, metric).assign(metric=metric) for metric in metrics_of(rows)]
        table = pd.concat(boards, ignore_index=True)
        table[["metric", *table.columns[:-1]]].to_csv(out / f"{task}.csv", index=False, float_format="%.6g")
        printed[task] = render(task, rows, "simple")
    return printed
