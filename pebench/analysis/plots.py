"""The report's figures (matplotlib): a metric against length per task, the training curves, a
language model's loss by position in the window."""

from __future__ import annotations

import textwrap
import zlib
from pathlib import Path

import pandas as pd

from pebench.analysis.frames import Frames
from pebench.analysis.leaderboards import counts_ood, length_scores, on_diagonal, ranked, reach_columns
from pebench.analysis.statistics import interval
from pebench.core.metrics import METRICS

STYLES = {
    # A fixed colour and marker per built-in encoding, so that a figure's baselines keep theirs
    # whatever else it shows: one hue per family (tab10), one marker per member.
    "nope": ("#000000", "o"),
    "sinusoidal": ("#ff7f0e", "o"),
    "randomized_sinusoidal": ("#ff7f0e", "s"),
    "learned": ("#2ca02c", "o"),
    "relative": ("#d62728", "o"),
    "t5": ("#9467bd", "o"),
    "rope": ("#1f77b4", "o"),
    "rope_pi": ("#1f77b4", "s"),
    "rope_ntk": ("#1f77b4", "^"),
    "rope_yarn": ("#1f77b4", "v"),
    "xpos": ("#1f77b4", "D"),
    "randomized": ("#1f77b4", "P"),
    "alibi": ("#8c564b", "o"),
    "kerple": ("#e377c2", "o"),
    "fire": ("#bcbd22", "o"),
    "flow": ("#17becf", "o"),
    "flow_input": ("#17becf", "s"),
}
OTHER_COLORS = ("#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1")
TITLE_WIDTH = 110  # characters per title line at the figures' width


def style(encoding: str) -> tuple[str, str]:
    """The colour and marker of an encoding's row label (``name``, ``name@hash``, ``name [code]``):
    the built-in's from :data:`STYLES`, another's from its name's CRC-32 (the same in every
    figure and process) with a star."""
    name = encoding.split("@")[0].split(" [")[0]
    return STYLES.get(name) or (OTHER_COLORS[zlib.crc32(name.encode()) % len(OTHER_COLORS)], "*")


def _marked(encoding: str, points: int, size: float, marks: int = 8) -> dict:
    """The line keywords of an encoding in a plot of ``points`` points: its :func:`style`, about
    ``marks`` markers of ``size`` points along the line."""
    color, marker = style(encoding)
    return dict(color=color, marker=marker, markersize=size, markevery=max(1, points // marks))


def _title(text: str) -> str:
    return textwrap.fill(text, TITLE_WIDTH)


def _training_lengths(lo: int, hi: int) -> str:
    return f"training length ({hi})" if lo == hi else f"training lengths ({lo}-{hi})"


def plot(name: str, table: Frames, runs: pd.DataFrame, path: Path, highlight: frozenset[str] = frozenset()) -> None:
    """PNG of the primary metric against length, one line per encoding: mean over runs with its
    95% interval as a band, per length (per bucket, at its midpoint, for text metrics); the
    training lengths shaded; encodings not ranked (most runs did not learn ID) dashed; on the
    length axis, each encoding's extrapolation length ℓ* (:func:`pebench.analysis.leaderboards.reach_columns`,
    median over the runs that learned ID, which unlike the table's mean is one run's length; none
    where it is 0) marked, ▲ at the first threshold, △ at the second. Each encoding keeps its
    colour and marker (:func:`style`); bands are clipped to the metric's range
    (:attr:`pebench.core.metrics.Metric.bounds`); ``highlight``: encodings drawn bold, the others
    light and without bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = runs["primary"].iloc[0]
    points = _plot_points(table, runs, metric)
    reach = reach_columns(table, runs)
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=100)
    lo, hi = runs["train_lo"].iloc[0], runs["train_hi"].iloc[0]
    low, high = METRICS[metric].bounds
    for encoding, group in runs.groupby("encoding", sort=True):
        values = points[points.run.isin(group.run)].groupby("x")["value"]
        mean, half = values.mean(), values.agg(interval).fillna(0)
        marked = _marked(encoding, len(mean), 3.5, marks=12)
        color = marked["color"]
        shown = not highlight or encoding in highlight
        line = "-" if ranked(group["learned"]) else "--"
        axes.plot(
            mean.index,
            mean,
            line,
            linewidth=(2.2 if highlight else 1.2) if shown else 0.8,
            alpha=1.0 if shown else 0.35,
            label=encoding,
            zorder=3 if highlight and shown else 2,
            **marked,
        )
        if shown:
            axes.fill_between(mean.index, (mean - half).clip(low, high), (mean + half).clip(low, high), color=color, alpha=0.12, linewidth=0)
        for ratios, face in zip(reach.values(), (color, "none")):
            ratio = ratios.loc[group.run][counts_ood(group).to_numpy()].median()
            if ratio > 0:
                axes.scatter([ratio * hi], [0.03], marker="^", s=28, facecolors=face, edgecolors=color, transform=axes.get_xaxis_transform(), zorder=3)
    axes.axvspan(lo - 0.5, hi + 0.5, color="#f5deb3", alpha=0.5, label=_training_lengths(lo, hi))  # wheat: no encoding's band is of its hue
    per = (
        "bucket midpoints" if METRICS[metric].kind == "text" else "the grid's diagonal: both operands of n digits" if on_diagonal(table, runs) else "per length"
    )
    axes.set(xlabel=f"length ({runs['unit'].iloc[0]}; {per})", ylabel=metric)
    axes.set_title(
        _title(f"{name}: {metric} against length (mean and 95% interval over runs; dashed: not ranked)")
        + ("\n" + ", ".join(f"{mark} {column}" for mark, column in zip("▲△", reach)) + ", median over the runs that learned ID" if reach else ""),
        fontsize=9,
    )
    if METRICS[metric].kind == "language_model":  # Press et al.'s figure 1: perplexity against the evaluation length, both on log scales
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
    else:
        axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def plot_positions(name: str, table: Frames, runs: pd.DataFrame, path: Path) -> None:
    """PNG of a language model's loss against the position in the window, at each evaluation
    length (a panel each), one line per encoding (mean over runs), the training length marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = table.positions[table.positions.run.isin(runs.run)].merge(runs[["run", "encoding"]], on="run")
    lengths = sorted(points["length"].unique())
    figure, panels = plt.subplots(1, len(lengths), figsize=(3.2 * len(lengths) + 2, 3.6), dpi=100, squeeze=False)
    for axes, length in zip(panels[0], lengths):
        for encoding, rows in points[points.length == length].groupby("encoding", sort=True):
            mean = rows.groupby("position")["loss"].mean()
            axes.plot(mean.index, mean, linewidth=1, label=encoding, **_marked(encoding, len(mean), 3))
        axes.axvline(runs["train_hi"].iloc[0], color="black", linestyle="--", linewidth=1)
        axes.set(title=f"context {length}", xlabel="position in the window", ylabel="loss (nats)" if length == lengths[0] else None)
        axes.grid(alpha=0.3)
    panels[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.suptitle(_title(f"{name}: loss by position, nonoverlapping windows (dashed: the training length)"), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def plot_grid(name: str, table: Frames, runs: pd.DataFrame, path: Path) -> None:
    """PNG of a grid task's primary metric per cell (len a x len b), one heat map per encoding,
    the mean over its runs (McLeish et al. 2024, fig. 1); the training lengths boxed. Cells
    are drawn at their rank in the grid (the grid's lengths label the axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric, train = runs["primary"].iloc[0], runs["train_hi"].iloc[0]
    cells = table.cells[table.cells.run.isin(runs.run) & (table.cells.metric == metric)].merge(runs[["run", "encoding"]], on="run")
    grid = sorted(set(cells["a"]) | set(cells["b"]))
    encodings = sorted(cells["encoding"].unique())
    columns = min(3, len(encodings))
    rows = -(-len(encodings) // columns)
    figure, panels = plt.subplots(rows, columns, figsize=(4.2 * columns + 1, 3.9 * rows), dpi=100, squeeze=False)
    for axes, encoding in zip(panels.flat, encodings):
        mean = cells[cells.encoding == encoding].pivot_table(index="b", columns="a", values="value", aggfunc="mean").reindex(index=grid, columns=grid)
        image = axes.imshow(mean.to_numpy(dtype=float), origin="lower", vmin=0, vmax=1, cmap="viridis")
        inside = sum(length <= train for length in grid)
        axes.add_patch(plt.Rectangle((-0.5, -0.5), inside, inside, fill=False, edgecolor="red", linewidth=1.5))
        axes.set_xticks(range(len(grid)), grid, fontsize=6, rotation=90)
        axes.set_yticks(range(len(grid)), grid, fontsize=6)
        seeds = runs[runs.encoding == encoding].shape[0]
        axes.set(title=f"{encoding} ({seeds} run{'s' * (seeds != 1)})", xlabel="digits of a (one column per grid length)", ylabel="digits of b")
    for axes in list(panels.flat)[len(encodings) :]:
        axes.axis("off")
    figure.colorbar(image, ax=panels.ravel().tolist(), shrink=0.8, label=metric)
    sizes = cells.drop_duplicates(["run", "a", "b"]).groupby([cells.a == cells.b])["n"]
    counted = ", ".join(
        f"{'diagonal' if diagonal else 'other'} cells {low}-{high} examples a run" for diagonal, (low, high) in sizes.agg(["min", "max"]).iterrows()
    )
    figure.suptitle(
        _title(f"{name}: {metric} per operand lengths, mean over runs (red box: the training lengths, 1-{train}; white: not evaluated; {counted})"), fontsize=10
    )
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def plot_curves(name: str, table: Frames, runs: pd.DataFrame, path: Path) -> None:
    """PNG of the training curves: the mean training loss and the ID validation score of the
    primary metric against the step, one line per run (the colour and marker of its encoding,
    :func:`style`), the ID target marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = table.curves[table.curves.run.isin(runs.run)].merge(runs[["run", "encoding"]], on="run")
    figure, (loss_axes, score_axes) = plt.subplots(1, 2, figsize=(12, 4.2), dpi=100)
    for encoding, rows in curves.groupby("encoding", sort=True):
        for number, (_, run) in enumerate(rows.groupby("run", sort=True)):
            line = dict(linewidth=1, **_marked(encoding, len(run), 5))
            loss_axes.plot(run["step"], run["loss"], label=encoding if number == 0 else None, **line)
            score_axes.plot(run["step"], run["validation"], **line)
    target = runs["target"].iloc[0]
    if pd.notna(target):
        score_axes.axhline(target, color="black", linestyle="--", linewidth=1)
    loss_axes.set(xlabel="step", ylabel="training loss", yscale="log", title="mean training loss since the last validation")
    score_axes.set(
        xlabel="step", ylabel=runs["primary"].iloc[0], title="ID validation score" + (f" (dashed: the target, {target:g})" if pd.notna(target) else "")
    )
    for axes in (loss_axes, score_axes):
        axes.grid(alpha=0.3)
    loss_axes.legend(fontsize=7)
    figure.suptitle(_title(f"{name}: training curves, one line per run"), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def _plot_points(table: Frames, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """(run, x, value) of ``metric``: per length where recorded (a grid task's diagonal,
    :func:`pebench.analysis.leaderboards.length_scores`), else per bucket midpoint (an open last bucket at
    1.25x its lower edge)."""
    lengths = length_scores(table, runs, metric)
    if METRICS[metric].kind != "text" and not lengths.empty:
        return lengths.rename(columns={"length": "x"})[["run", "x", "value"]].astype({"value": float})
    buckets = table.scores[table.scores.run.isin(runs.run) & (table.scores.metric == metric) & (table.scores.order >= 2)]
    x = [(lo + hi) / 2 if hi != float("inf") else 1.25 * lo for lo, hi in zip(buckets["lo"], buckets["hi"])]
    return pd.DataFrame({"run": buckets["run"], "x": x, "value": buckets["value"].astype(float)})
