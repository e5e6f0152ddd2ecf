"""Leaderboards from run records: per task and overall, as Markdown, CSV, LaTeX and HTML, with a
plot of the primary metric against length per task.

For every encoding (configuration) of a task, over its seeds, for the primary metric (and in
smaller tables, for each other metric the task reports):
- *ID score*: the metric on the in-distribution bucket;
- each OOD bucket's value, and the *OOD score*: their mean, buckets weighted equally;
- *extrapolation ratio*: mean OOD score / mean ID score;
- throughput from the side-by-side benchmark (``pebench bench``, :mod:`pebench.bench`) at
  :data:`BENCH_LENGTH` tokens in the task's architecture: training tokens/s and the training and
  evaluation step time relative to NoPE. Run wall times are not used: runs may have shared the
  machine. Without a benchmark table, the columns are left out and the title says so;
- the encoding's own parameter count.
Scores are mean ± sample standard deviation over seeds; rows are sorted by OOD score.

The overall table ranks encodings within each task by OOD score of the primary metric (ties
share the mean rank) and orders them by their mean rank over the tasks they ran.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tabulate import tabulate

from .protocol import METRICS

BENCH_LENGTH = 256
FORMATS = {"md": "github", "tex": "latex_booktabs", "html": "html"}


def _per_run(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per (encoding, seed): ID, OOD score and every bucket's value of ``metric``."""
    keys = ["encoding", "seed"]
    wide = frame.pivot_table(index=keys, columns="bucket", values=metric, aggfunc="first", dropna=False)
    wide = wide.loc[pd.MultiIndex.from_frame(frame[keys].drop_duplicates())]  # only the runs that exist
    ood_labels = list(dict.fromkeys(frame.loc[~frame.in_distribution, "bucket"]))
    id_label = frame.loc[frame.in_distribution, "bucket"].iloc[0]
    runs = pd.DataFrame({"ID": wide[id_label]})
    for label in ood_labels:
        runs[label] = wide[label]
    runs["OOD"] = wide[ood_labels].mean(axis=1, skipna=False) if ood_labels else float("nan")
    params = frame.groupby(keys)["encoding_parameters"].first()
    return runs.join(params).reset_index()


def leaderboard(frame: pd.DataFrame, metric: str | None = None, throughput: pd.DataFrame | None = None) -> pd.DataFrame:
    """The numeric leaderboard of one task's rows of :func:`pebench.records.to_frame`, for
    ``metric`` (default: the task's primary metric), with the benchmark's figures from
    ``throughput`` (:func:`pebench.bench.load`) when given."""
    runs = _per_run(frame, metric or frame["primary_metric"].iloc[0])
    scores = [c for c in runs.columns if c not in ("encoding", "seed", "encoding_parameters")]
    grouped = runs.groupby("encoding")
    board = pd.DataFrame({"seeds": grouped.size()})
    for column in scores:
        board[f"{column} mean"] = grouped[column].mean()
        board[f"{column} std"] = grouped[column].std()
    board["OOD/ID"] = board["OOD mean"] / board["ID mean"].where(board["ID mean"] > 0)
    if throughput is not None:
        board = board.join(bench_columns(throughput, frame["architecture"].iloc[0]))
    board["PE params"] = grouped["encoding_parameters"].first()
    return board.sort_values(["OOD mean", "ID mean"], ascending=False).reset_index()


def bench_columns(throughput: pd.DataFrame, architecture: str) -> pd.DataFrame:
    """The benchmark's pebench rows at :data:`BENCH_LENGTH` in ``architecture``, indexed by
    encoding card: training tokens/s, training and evaluation step time over NoPE's. A
    configuration run with overrides
    (``name@hash``) has no row of its own."""
    rows = throughput[(throughput.implementation == "pebench") & (throughput.architecture == architecture) & (throughput.length == BENCH_LENGTH)]
    rows = rows.set_index("contender")
    return pd.DataFrame({
        "train tok/s": rows["train_tokens_per_second"],
        "train step vs NoPE": rows["train_vs_nope"],
        "eval step vs NoPE": rows["eval_vs_nope"],
    })


def _mean_std(mean: float, std: float) -> str:
    if pd.isna(mean):
        return "—"
    return f"{mean:.3f}" if pd.isna(std) else f"{mean:.3f} ± {std:.3f}"


def _number(value, pattern: str) -> str:
    return "—" if pd.isna(value) else format(value, pattern)


def display(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard with scores as ``mean ± std`` strings, for printing."""
    shown = pd.DataFrame({"encoding": board["encoding"]})
    for column in board.columns:
        if column.endswith(" mean"):
            name = column[: -len(" mean")]
            shown[name] = [_mean_std(m, s) for m, s in zip(board[column], board[f"{name} std"])]
    shown["OOD/ID"] = board["OOD/ID"].map(lambda v: _number(v, ".3f"))
    if "train tok/s" in board:
        shown["train tok/s"] = board["train tok/s"].map(lambda v: _number(v, ",.0f"))
        shown["train step vs NoPE"] = board["train step vs NoPE"].map(lambda v: _number(v, ".2f"))
        shown["eval step vs NoPE"] = board["eval step vs NoPE"].map(lambda v: _number(v, ".2f"))
    shown["PE params"] = board["PE params"].map(lambda v: f"{v:,}")
    shown["seeds"] = board["seeds"]
    return shown


def metrics_of(frame: pd.DataFrame) -> list[str]:
    """The task's primary metric, then its other metrics present in the records."""
    primary = frame["primary_metric"].iloc[0]
    return [primary] + [m for m in METRICS if m != primary and m in frame.columns and frame[m].notna().any()]


def _table(shown: pd.DataFrame, table_format: str) -> str:
    return tabulate(shown, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)


def render(task: str, frame: pd.DataFrame, table_format: str, throughput: pd.DataFrame | None = None) -> str:
    """A task's titled leaderboards in a tabulate format ("github", "simple", "latex_booktabs",
    "html"): the primary metric with throughput, then each other metric's scores."""
    id_label = frame.loc[frame.in_distribution, "bucket"].iloc[0]
    sizes = ", ".join(f"{bucket} n={n}" for bucket, n in frame.groupby("bucket", sort=False)["n"].first().items())
    architecture = frame["architecture"].iloc[0]
    speed = (f"throughput: pebench bench, {architecture} at {BENCH_LENGTH} tokens" if throughput is not None
             else "throughput: no benchmark table (run `pebench bench`)")
    parts = []
    for index, metric in enumerate(metrics_of(frame)):
        shown = display(leaderboard(frame, metric, throughput if index == 0 else None))
        title = f"{task}: {metric} per length bucket (ID = {id_label}; {sizes}), mean ± std over seeds"
        parts.append(f"{title}{'; ' + speed if index == 0 else ''}\n\n{_table(shown, table_format)}\n")
    return "\n".join(parts)


def overall(frame: pd.DataFrame) -> pd.DataFrame:
    """Encodings ranked within each task by the primary metric's OOD score (1 = best; no score,
    e.g. an unrepresentable bucket, ranks last), with their mean rank over the tasks they ran;
    sorted by mean rank."""
    ranks = {}
    for task, rows in sorted(frame.groupby("task")):
        board = leaderboard(rows).set_index("encoding")
        ranks[task] = board["OOD mean"].rank(ascending=False, method="average", na_option="bottom")
    table = pd.DataFrame(ranks)
    table.insert(0, "mean rank", table.mean(axis=1))
    table.insert(1, "tasks", table.drop(columns="mean rank").notna().sum(axis=1))
    return table.sort_values(["mean rank", "tasks"], ascending=[True, False]).rename_axis("encoding").reset_index()


def display_overall(table: pd.DataFrame) -> pd.DataFrame:
    shown = table.copy()
    for column in shown.columns[1:]:
        if column != "tasks":
            shown[column] = shown[column].map(lambda v: _number(v, ".2f" if column == "mean rank" else "g"))
    return shown


def plot(task: str, frame: pd.DataFrame, path: Path) -> None:
    """PNG of the primary metric against sequence length, one line per encoding (mean over
    seeds, ± std band), each bucket at its midpoint (an open last bucket at 1.25x its lower
    edge), the longest training length (the card's ``split.train`` maximum) marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = frame["primary_metric"].iloc[0]
    frame = frame.assign(hi=pd.to_numeric(frame["hi"], errors="coerce").fillna(float("inf")))  # open last bucket
    x_of = lambda lo, hi: (lo + hi) / 2 if hi != float("inf") else 1.25 * lo  # noqa: E731
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=100)
    colors = plt.get_cmap("tab20").colors
    summary = frame.groupby(["encoding", "lo", "hi"], sort=True)[metric].agg(["mean", "std"]).reset_index()
    for index, (encoding, rows) in enumerate(summary.groupby("encoding", sort=True)):
        x = [x_of(lo, hi) for lo, hi in zip(rows.lo, rows.hi)]
        color = colors[index % len(colors)]
        axes.plot(x, rows["mean"], marker="o", markersize=3, label=encoding, color=color)
        axes.fill_between(x, rows["mean"] - rows["std"].fillna(0), rows["mean"] + rows["std"].fillna(0), color=color, alpha=0.15, linewidth=0)
    train_max = frame["train_max"].iloc[0]
    axes.axvline(train_max, color="black", linestyle="--", linewidth=1, label=f"training maximum ({train_max:g})")
    axes.set(xlabel=f"length ({frame['unit'].iloc[0]}; bucket midpoints)", ylabel=metric,
             title=f"{task}: {metric} against length (mean ± std over seeds)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def write_reports(frame: pd.DataFrame, out: Path, throughput: pd.DataFrame | None = None) -> dict[str, str]:
    """Write, for every task, ``<out>/<task>.{md,tex,html}`` (the rendered leaderboards),
    ``<task>.csv`` (every metric, a ``metric`` column) and ``<task>.png``; and
    ``overall.{md,tex,html,csv}``. Return the terminal rendering of each table."""
    out.mkdir(parents=True, exist_ok=True)
    printed = {}
    for task, rows in frame.groupby("task", sort=True):
        for suffix, table_format in FORMATS.items():
            (out / f"{task}.{suffix}").write_text(("## " if suffix == "md" else "") + render(task, rows, table_format, throughput))
        boards = [leaderboard(rows, metric, throughput if i == 0 else None).assign(metric=metric) for i, metric in enumerate(metrics_of(rows))]
        table = pd.concat(boards, ignore_index=True)
        table[["metric", *table.columns[:-1]]].to_csv(out / f"{task}.csv", index=False, float_format="%.6g")
        plot(task, rows, out / f"{task}.png")
        printed[task] = render(task, rows, "simple", throughput)
    ranking = overall(frame)
    title = "Overall: rank within each task by OOD score of its primary metric (1 = best), mean over tasks\n\n"
    for suffix, table_format in FORMATS.items():
        (out / f"overall.{suffix}").write_text(title + _table(display_overall(ranking), table_format) + "\n")
    ranking.to_csv(out / "overall.csv", index=False, float_format="%.6g")
    printed["overall"] = title + _table(display_overall(ranking), "simple") + "\n"
    return printed
