"""Leaderboards from run records: per task and overall, as Markdown, CSV, LaTeX and HTML, with a
plot of the primary metric against length per task, and the validity section
(:mod:`pebench.validity`).

One table per task and task settings and protocol (:mod:`pebench.results`); one row per encoding
configuration. For the primary metric (and, in smaller tables, each other metric):
- *learned ID*: the runs that reached the ID validation target, of all runs (protocol 2); a task
  without a target (wmt_long) counts every run;
- *steps*: the median steps to the target over the runs that reached it;
- *ID*: the ID score, mean over every run;
- each OOD bucket and the *OOD* score (the mean over the OOD lengths, or the corpus score of the
  OOD sentences: :mod:`pebench.evaluation`), mean over the runs that learned ID only: a model that
  has not learned the training lengths says nothing about longer ones;
- *OOD/ID*: OOD mean over ID mean (of the same runs);
- throughput from the side-by-side benchmark (``pebench bench``, :mod:`pebench.bench`) at
  :data:`BENCH_LENGTH` tokens in the task's architecture: training tokens/s and the training and
  evaluation step time relative to NoPE (run wall times are not used: runs may have shared the
  machine);
- the encoding's own parameter count.
Every mean carries its 95% interval, ``mean ± t * s / sqrt(n)`` (Student's t with n - 1 degrees
of freedom over the n runs; none for one run).

*Ranks*: within a task, an encoding is ranked when most of its runs learned ID (more than half),
by its OOD mean over those runs (1 = best: the highest score, the lowest perplexity or bits;
ties share the mean rank); the others are listed
below the ranked ones, marked, with no rank. The overall table orders encodings by their *mean
reciprocal rank* over tasks (Kazemnejad et al. 2023, arXiv:2305.19466, sec. 4), a task where an
encoding is not ranked counting 1/rank = 0, with a 95% paired bootstrap interval over seeds:
1,000 resamples of each task's seeds with replacement, the same drawn seeds for every encoding
(its run at seed s stands against its rivals' runs at seed s, which share that seed's training
data order), ranks and MRR recomputed in each, the 2.5th and 97.5th percentiles (seeded, so the
table is the same on every machine). A task run at one seed adds no spread to the interval; at
few seeds (the grid's 3) a percentile bootstrap has no small-sample correction and is narrower
than a Student-t interval: it shows the spread over seeds, and :mod:`pebench.validity` tests
differences with Student's t instead. Only protocol 2 tables
of the cards' own task settings enter the overall ranking. An MRR compares encodings only over
one set of runs and one field of rivals, so the overall ranking comes in *blocks*: encodings that
all ran the same tasks at the same seeds, ranked among themselves on those runs
(:func:`overall_groups`; the grid's two tiers make two blocks: the nine encodings on every task,
all seventeen on the synthetic tasks).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from tabulate import tabulate

from .cards import suite_levels
from .metrics import METRICS, higher_is_better
from .results import Tables, legend, tables

BENCH_LENGTH = 256
FORMATS = {"md": "github", "tex": "latex_booktabs", "html": "html"}
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


@functools.cache
def _t_quantile(degrees_of_freedom: int) -> float:
    return float(stats.t.ppf((1 + CONFIDENCE) / 2, degrees_of_freedom))


def interval(values) -> float:
    """Half-width of the 95% Student-t interval of the mean of ``values`` (NaN below two; NaN
    values are left out): t(0.975, n - 1) * s / sqrt(n), s the sample standard deviation."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return float("nan")
    return float(_t_quantile(len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def ranked(learned: pd.Series) -> bool:
    """Whether an encoding's runs count on a task: more than half learned ID (True), or the
    task has no target (None for every run)."""
    if learned.isna().all():
        return True
    return bool(learned.fillna(False).astype(bool).sum() * 2 > len(learned))


def counts_ood(runs: pd.DataFrame) -> pd.Series:
    """The runs whose OOD scores count: those that learned ID, or every run without a target."""
    return runs["learned"].isna() | runs["learned"].fillna(False).astype(bool)


def run_scores(table: Tables, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per run of ``runs``: the value of ``metric`` at ID, each bucket, OOD."""
    scores = table.scores[table.scores.run.isin(runs.run) & (table.scores.metric == metric)]
    order = scores.drop_duplicates("where").sort_values("order")["where"].tolist()
    wide = scores.pivot_table(index="run", columns="where", values="value", aggfunc="first", dropna=False)
    return wide.reindex(index=runs.run, columns=order).astype(float)


def leaderboard(table: Tables, runs: pd.DataFrame, metric: str, throughput: pd.DataFrame | None = None) -> pd.DataFrame:
    """The numeric leaderboard of one table's ``runs`` for ``metric``: per encoding, runs,
    learned, median steps to target, ``<column> mean`` and ``<column> ci`` (interval half-width)
    for ID, every bucket and OOD, OOD/ID, rank (NaN: not ranked), throughput and PE params."""
    wide = run_scores(table, runs, metric)
    ood_columns = [c for c in wide.columns if c not in ("ID", "OOD")][1:]  # the first bucket is ID
    rows = []
    for encoding, group in runs.groupby("encoding", sort=True):
        values, counted = wide.loc[group.run], counts_ood(group).to_numpy()
        row = {"encoding": encoding, "runs": len(group), "learned": int(group["learned"].fillna(False).astype(bool).sum()),
               "target": group["target"].iloc[0], "ranked": ranked(group["learned"]),
               "steps": group.loc[group["steps_to_target"].notna(), "steps_to_target"].median(),
               "ID mean": values["ID"].mean(), "ID ci": interval(values["ID"])}
        for column in [*ood_columns, "OOD"]:
            row[f"{column} mean"] = values[column][counted].mean() if counted.any() else float("nan")
            row[f"{column} ci"] = interval(values[column][counted])
        row["OOD/ID"] = row["OOD mean"] / values["ID"][counted].mean() if counted.any() and values["ID"][counted].mean() > 0 else float("nan")
        row["PE params"] = group["encoding_parameters"].iloc[0]
        rows.append(row)
    board = pd.DataFrame(rows)
    protocol2 = runs["protocol"].iloc[0] == 2
    scored = board["ranked"] & board["OOD mean"].notna() & protocol2
    higher_better = higher_is_better(metric)
    board["rank"] = board["OOD mean"].where(scored).rank(ascending=not higher_better, method="average")
    if throughput is not None:
        board = board.join(bench_columns(throughput, runs["architecture"].iloc[0]), on="encoding")
    return board.sort_values(["rank", "OOD mean", "ID mean"], ascending=[True, not higher_better, not higher_better],
                             na_position="last").reset_index(drop=True)


def bench_columns(throughput: pd.DataFrame, architecture: str) -> pd.DataFrame:
    """The benchmark's pebench rows at :data:`BENCH_LENGTH` in ``architecture``, indexed by
    encoding card: training tokens/s, training and evaluation step time over NoPE's. A
    configuration run with other settings (``name@hash``) has no row of its own."""
    rows = throughput[(throughput.implementation == "pebench") & (throughput.architecture == architecture) & (throughput.length == BENCH_LENGTH)]
    rows = rows.set_index("contender")
    return pd.DataFrame({
        "train tok/s": rows["train_tokens_per_second"],
        "train step vs NoPE": rows["train_vs_nope"],
        "eval step vs NoPE": rows["eval_vs_nope"],
    })


def _mean_ci(mean: float, half_width: float, digits: int) -> str:
    if pd.isna(mean):
        return "—"
    return f"{mean:.{digits}f}" if pd.isna(half_width) else f"{mean:.{digits}f} ± {half_width:.{digits}f}"


def _number(value, pattern: str) -> str:
    return "—" if pd.isna(value) else format(value, pattern)


def display(board: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The leaderboard as strings, for printing: scores as ``mean ± 95% half-width``."""
    shown = pd.DataFrame({"rank": board["rank"].map(lambda v: _number(v, "g")), "encoding": board["encoding"]})
    has_target = board["target"].notna().any()
    if has_target:
        shown["learned ID"] = [f"{learned}/{runs}" + ("" if rank else " (not ranked)") for learned, runs, rank in zip(board["learned"], board["runs"], board["ranked"])]
        shown["steps"] = board["steps"].map(lambda v: _number(v, ",.0f"))
    for column in board.columns:
        if column.endswith(" mean"):
            name = column[: -len(" mean")]
            shown[name] = [_mean_ci(m, c, digits) for m, c in zip(board[column], board[f"{name} ci"])]
    shown["OOD/ID"] = board["OOD/ID"].map(lambda v: _number(v, ".3f"))
    if "train tok/s" in board:
        shown["train tok/s"] = board["train tok/s"].map(lambda v: _number(v, ",.0f"))
        shown["train step vs NoPE"] = board["train step vs NoPE"].map(lambda v: _number(v, ".2f"))
        shown["eval step vs NoPE"] = board["eval step vs NoPE"].map(lambda v: _number(v, ".2f"))
    shown["PE params"] = board["PE params"].map(lambda v: f"{v:,}")
    shown["runs"] = board["runs"]
    return shown


def metrics_of(runs: pd.DataFrame) -> list[str]:
    """The table's primary metric, then its other metrics."""
    primary = runs["primary"].iloc[0]
    return [primary, *[m for m in runs["metrics"].iloc[0] if m != primary]]


def _table(shown: pd.DataFrame, table_format: str) -> str:
    return tabulate(shown, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)


def _title(name: str, table: Tables, runs: pd.DataFrame, metric: str) -> str:
    """What the table shows: metric, protocol, ID bucket, bucket sizes, the interval, the rule."""
    first = runs.run.iloc[0]
    buckets = table.scores[(table.scores.run == first) & (table.scores.order >= 2)].drop_duplicates("where")
    protocol = runs["protocol"].iloc[0]
    sizes = ", ".join(buckets["where"])
    target = runs["target"].iloc[0]
    if protocol == 1:
        rule = "protocol 1: fixed budget, teacher-forced scores, OOD = mean of the OOD buckets; not ranked"
    elif pd.isna(target):
        rule = "no ID target: every run counts"
    else:
        rule = f"ID target {target:g} on the ID validation set; OOD over the runs that learned ID"
    return f"{name}: {metric} (ID = {buckets['where'].iloc[0]}; buckets {sizes}), mean ± 95% interval over runs; {rule}"


def boards_of(table: Tables, runs: pd.DataFrame, throughput: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """A table's leaderboards, built once and then rendered in every format: ``{metric: its
    :func:`leaderboard`}`` (one row per encoding), in :func:`metrics_of` order, throughput
    columns on the primary metric's only."""
    return {metric: leaderboard(table, runs, metric, throughput if index == 0 else None) for index, metric in enumerate(metrics_of(runs))}


def render(name: str, table: Tables, runs: pd.DataFrame, boards: dict[str, pd.DataFrame], table_format: str) -> str:
    """A table's titled leaderboards (:func:`boards_of`) in a tabulate format ("github",
    "simple", "latex_booktabs", "html"): the primary metric with throughput, then each other metric."""
    architecture = runs["architecture"].iloc[0]
    with_speed = "train tok/s" in next(iter(boards.values()))
    speed = (f"throughput: pebench bench, {architecture} at {BENCH_LENGTH} tokens" if with_speed
             else "throughput: no benchmark table (run `pebench bench`)")
    parts = []
    for index, (metric, board) in enumerate(boards.items()):
        shown = display(board, METRICS[metric].digits)
        if index:
            shown = shown.drop(columns=[c for c in ("rank", "learned ID", "steps") if c in shown])
        parts.append(f"{_title(name, table, runs, metric)}{'; ' + speed if index == 0 else ''}\n\n{_table(shown, table_format)}\n")
    capped = table.capped.merge(runs[["run", "encoding", "seed"]], on="run")
    if not capped.empty:
        counts = "; ".join(f"{row.encoding} seed {row.seed}, bucket {row.bucket}: {row.capped}" for row in capped.itertuples())
        parts.append(f"outputs that stopped at the decoding cap without EOS (counted as generated): {counts}\n")
    return "\n".join(parts)


def _reciprocal_ranks(scores: np.ndarray) -> np.ndarray:
    """scores ``[..., encodings]`` (NaN: not ranked) -> 1 / rank among the ranked (higher score
    first, ties sharing the mean rank), 0 where not ranked."""
    ranks = stats.rankdata(np.where(np.isnan(scores), np.inf, -scores), method="average", axis=-1)
    return np.where(np.isnan(scores), 0.0, 1.0 / ranks)


def _cell_scores(runs: pd.DataFrame, ood: pd.Series, weights: np.ndarray) -> np.ndarray:
    """An encoding's task score: the mean OOD score of its counted runs that have one (as the
    task table's OOD mean), when ranked, else NaN; ``weights`` ``[B, n]``: how many times each of
    its n runs is drawn in each of B resamples (all ones: the point estimate); one score per
    resample ``[B]``. A run without an OOD score (a bucket its encoding cannot represent) is left
    out of the mean, never read as 0."""
    kept, values = counts_ood(runs).to_numpy(), ood.to_numpy(dtype=float)
    scored = weights * (kept & ~np.isnan(values))
    total = scored.sum(axis=1)
    mean = np.where(total > 0, (scored * np.nan_to_num(values)).sum(axis=1) / np.maximum(total, 1), np.nan)
    majority = np.ones(len(weights), dtype=bool) if runs["learned"].isna().all() else (weights * kept).sum(axis=1) * 2 > weights.sum(axis=1)
    return np.where(majority, mean, np.nan)


def _seed_draws(seeds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[B, len(seeds)]``: how many times each of a task's seeds is drawn in each of
    :data:`BOOTSTRAP_RESAMPLES` resamples of its seeds with replacement."""
    draws = rng.integers(0, len(seeds), (BOOTSTRAP_RESAMPLES, len(seeds)))
    return (draws[:, :, None] == np.arange(len(seeds))).sum(axis=1)


def ranked_runs(table: Tables) -> pd.DataFrame:
    """The runs the overall ranking and the validity claims use: protocol 2, at the cards' own
    task settings (a run with other buckets or budgets is a table of its own, never ranked)."""
    return table.runs[(table.runs.protocol == 2) & (table.runs.table == table.runs.task)]


def overall(table: Tables, metric: str | None = None) -> pd.DataFrame:
    """Encodings by mean reciprocal rank over the protocol 2 tasks of the cards' own settings
    (see the module docstring), on each task's primary metric or on ``metric``: MRR, its 95%
    paired bootstrap interval, tasks ranked on of tasks run, and the rank in each task (NaN: not
    ranked there; absent: not run).

    Raises:
        ValueError: when the encodings that ran a task ran it at different seeds: a paired
            comparison needs the same seeds (:func:`overall_groups` makes such sets)."""
    runs = ranked_runs(table)
    encodings = sorted(runs.encoding.unique())
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    point, samples, ranks, ran = {}, {}, {}, {}
    for task, task_runs in sorted(runs.groupby("task")):
        scored = metric or task_runs["primary"].iloc[0]
        ood = run_scores(table, task_runs, scored)["OOD"] * (1 if higher_is_better(scored) else -1)  # higher is better from here
        cells = {e: g for e, g in task_runs.groupby("encoding")}
        seeds = np.sort(task_runs.seed.unique())
        unpaired = sorted(e for e, group in cells.items() if not np.array_equal(np.unique(group.seed), seeds))
        if unpaired:
            raise ValueError(f"overall ranking of {task}: {', '.join(unpaired)} did not run every seed of {seeds.tolist()}; "
                             "rank over the seeds all encodings ran (overall_groups)")
        drawn = _seed_draws(seeds, rng)  # [B, seeds], shared by every encoding: the pairing
        point_scores = np.array([_cell_scores(cells[e], ood.loc[cells[e].run], np.ones((1, len(cells[e]))))[0] if e in cells else np.nan
                                 for e in encodings])
        boot = np.stack([_cell_scores(cells[e], ood.loc[cells[e].run], drawn[:, np.searchsorted(seeds, cells[e].seed)])
                         if e in cells else np.full(BOOTSTRAP_RESAMPLES, np.nan) for e in encodings], axis=1)  # [B, encodings]
        point[task], samples[task] = _reciprocal_ranks(point_scores), _reciprocal_ranks(boot)
        ranks[task] = pd.Series(stats.rankdata(-point_scores[~np.isnan(point_scores)], method="average"),
                                index=np.array(encodings)[~np.isnan(point_scores)])
        ran[task] = np.array([e in cells for e in encodings])
    if not point:
        return pd.DataFrame(columns=["encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run"])
    ran_matrix = np.stack([ran[t] for t in point], axis=1)  # [encodings, tasks]
    runs_on = ran_matrix.sum(axis=1)
    mrr = (np.stack([point[t] for t in point], axis=1) * ran_matrix).sum(axis=1) / np.maximum(runs_on, 1)
    boot_mrr = (np.stack([samples[t] for t in point], axis=2) * ran_matrix[None]).sum(axis=2) / np.maximum(runs_on, 1)  # [B, encodings]
    result = pd.DataFrame({
        "encoding": encodings, "MRR": mrr,
        "MRR low": np.percentile(boot_mrr, 100 * (1 - CONFIDENCE) / 2, axis=0),
        "MRR high": np.percentile(boot_mrr, 100 * (1 + CONFIDENCE) / 2, axis=0),
        "tasks ranked": [int(sum(e in ranks[t].index for t in point)) for e in encodings], "tasks run": runs_on,
    })
    for task in point:
        result[task] = pd.Series([ranks[task].get(e, np.nan) if r else None for e, r in zip(encodings, ran[task])], dtype=object)
    return result.sort_values(["MRR", "tasks ranked"], ascending=[False, False]).reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class RankingGroup:
    """One table of the overall ranking: ``ranking`` (:func:`overall` of the block's runs) and
    ``cells``, the (task, seed) pairs at which every one of its encodings has a run."""

    ranking: pd.DataFrame
    cells: frozenset

    @property
    def tasks(self) -> list[str]:
        return sorted({task for task, _ in self.cells})


def overall_groups(table: Tables, metric: str | None = None) -> list[RankingGroup]:
    """The overall ranking in complete blocks (see the module docstring), on each task's primary
    metric or on ``metric``.

    A block is a set of encodings E and a set of (task, seed) cells C such that every encoding of
    E has a run (protocol 2, the cards' settings) at every cell of C, C holds every cell they all
    share, and E every encoding that ran all of C: the formal concepts of the relation "has a run
    at", those of two encodings or more. Ranks and MRR are computed on those runs alone, so within
    a block every encoding is compared on the same tasks, at the same seeds, against the same
    rivals. Blocks come largest first (encodings x tasks). A grid of tiers (the nine encodings on
    every task, seventeen on some) gives one block per tier."""
    runs = ranked_runs(table)
    ran = {encoding: frozenset(zip(group.task, group.seed)) for encoding, group in runs.groupby("encoding")}
    intents, frontier = set(ran.values()), set(ran.values())
    while frontier:  # every intersection of encodings' cells: intersect the new ones with each encoding's
        frontier = {shared & cells for shared in frontier for cells in ran.values()} - intents - {frozenset()}
        intents |= frontier
    blocks = []
    for cells in intents:
        encodings = [encoding for encoding, done in ran.items() if cells <= done]
        if len(encodings) > 1:
            chosen = runs.encoding.isin(encodings) & pd.MultiIndex.from_arrays([runs.task, runs.seed]).isin(list(cells))
            blocks.append(RankingGroup(overall(dataclasses.replace(table, runs=runs[chosen]), metric), cells))
    return sorted(blocks, key=lambda b: (-len(b.ranking) * len(b.tasks), -len(b.ranking), b.tasks))


def display_overall(table: pd.DataFrame) -> pd.DataFrame:
    shown = pd.DataFrame({"encoding": table["encoding"], "MRR": table["MRR"].map(lambda v: f"{v:.3f}"),
                          "95% interval": [f"{lo:.3f}-{hi:.3f}" for lo, hi in zip(table["MRR low"], table["MRR high"])],
                          "tasks ranked": [f"{r}/{n}" for r, n in zip(table["tasks ranked"], table["tasks run"])]})
    for task in table.columns[6:]:
        shown[task] = table[task].map(lambda v: "" if v is None else "—" if pd.isna(v) else format(v, "g"))
    return shown


OVERALL_TITLE = ("Overall: mean reciprocal rank over tasks (Kazemnejad et al. 2023) of the OOD score of each task's primary metric, "
                 "95% paired bootstrap interval over seeds; per task, the rank (— : not ranked, most runs did not learn ID). "
                 "One table per block: encodings that all ran the same tasks at the same seeds, ranked among themselves on those runs; "
                 "an MRR compares only within its table")


def _block_title(block: RankingGroup) -> str:
    encodings, tasks = len(block.ranking), block.tasks
    listed = f" ({', '.join(tasks)})" if len(tasks) <= 6 else ""
    return f"{encodings} encodings x {len(tasks)} task{'s' * (len(tasks) != 1)}{listed}, the same {len(block.cells)} runs each (task, seed)"


def render_overall(blocks: list[RankingGroup], encodings: list[str], table_format: str) -> str:
    """The overall title, each block's size and table, and the encodings in no block."""
    if not blocks:
        return OVERALL_TITLE + "\n\nNo two encodings have runs at a common task and seed yet.\n"
    parts = [f"{_block_title(b)}:\n\n{_table(display_overall(b.ranking), table_format)}\n" for b in blocks]
    alone = sorted(set(encodings) - {e for b in blocks for e in b.ranking.encoding})
    if alone:
        parts.append(f"In no table (no other encoding ran any of their tasks at the same seed): {', '.join(alone)}\n")
    return OVERALL_TITLE + "\n\n" + "\n".join(parts)


def overall_csv(blocks: list[RankingGroup]) -> pd.DataFrame:
    """The blocks as one table: ``block`` (1 = the first), ``runs each``, ``tasks`` (the block's,
    ``;``-separated), the ranking's columns, then one column per task (sorted): the rank, ``not
    ranked``, or empty where the task is not in the block."""
    tasks = sorted({task for b in blocks for task in b.tasks})
    rows = []
    for number, block in enumerate(blocks, start=1):
        for _, row in block.ranking.iterrows():
            ranks = {t: ("" if t not in block.tasks else "not ranked" if pd.isna(row[t]) else format(row[t], "g")) for t in tasks}
            rows.append({"block": number, "runs each": len(block.cells), "tasks": ";".join(block.tasks),
                         **row[["encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run"]].to_dict(), **ranks})
    return pd.DataFrame(rows, columns=["block", "runs each", "tasks", "encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run", *tasks])


CHOMSKY_TITLE = ("The Chomsky hierarchy (Delétang et al. 2023), laid out as Ruoss et al. 2023's table 1: per task and encoding, "
                 "the OOD score of the primary metric (mean over the runs that learned ID; the best of each task in bold); "
                 "— (x): not ranked, most runs did not learn ID, x their ID score")


def suite_scores(table: Tables, levels: dict[str, tuple[str, ...]]) -> pd.DataFrame:
    """One row per (task, encoding) of the tasks in ``levels`` ({level: its tasks, in order})
    that have protocol 2 runs at the cards' settings: level, task, encoding, metric (the task's
    primary), ranked (most runs learned ID), rank, ID and OOD means, as in the task's
    :func:`leaderboard`."""
    runs, rows = ranked_runs(table), []
    for level, tasks in levels.items():
        for task in tasks:
            task_runs = runs[runs.task == task]
            if task_runs.empty:
                continue
            metric = task_runs["primary"].iloc[0]
            board = leaderboard(table, task_runs, metric)
            rows += [{"level": level, "task": task, "encoding": row.encoding, "metric": metric, "ranked": bool(row.ranked),
                      "rank": row["rank"], "ID": row["ID mean"], "OOD": row["OOD mean"]} for _, row in board.iterrows()]
    return pd.DataFrame(rows, columns=["level", "task", "encoding", "metric", "ranked", "rank", "ID", "OOD"])


def render_suite(scores: pd.DataFrame, title: str) -> str:
    """:func:`suite_scores` as a Markdown matrix: a row per task, a column per encoding."""
    best = scores.groupby("task")["rank"].transform("min")

    def cell(row) -> str:
        if pd.isna(row["rank"]):
            return f"— ({row.ID:.2f})"
        return f"**{row.OOD:.3f}**" if row["rank"] == best[row.name] else f"{row.OOD:.3f}"

    shown = scores.assign(cell=scores.apply(cell, axis=1)).pivot(index=["level", "task"], columns="encoding", values="cell")
    order = list(dict.fromkeys(zip(scores.level, scores.task)))
    return title + "\n\n" + _table(shown.reindex(order).fillna("").reset_index(), "github") + "\n"


RUN_TIME_TITLE = ("Wall time of the protocol 2 runs at the cards' settings, per task: data, training and evaluation, "
                  "summed from each record's stages, at the threads and on the device each record names (the load beside a run "
                  "is not recorded)")


def run_times(table: Tables) -> pd.DataFrame:
    """Per task, most hours first, then ``all``: runs, encodings, seeds, hours in all and
    minutes per run (mean, fastest, slowest) of :func:`ranked_runs`, learned ID or not (the
    ``run_seconds`` of :func:`pebench.results.tables`; a record without stages is counted in
    ``runs`` and ``untimed``, not in the times), and the threads and devices recorded."""
    runs = ranked_runs(table)

    def summary(group: pd.DataFrame) -> dict:
        minutes = group.run_seconds / 60
        return {"runs": len(group), "encodings": group.encoding.nunique(), "seeds": ", ".join(map(str, sorted(group.seed.unique()))),
                "hours": minutes.sum() / 60, "minutes per run": minutes.mean(), "fastest": minutes.min(), "slowest": minutes.max(),
                "untimed": int(minutes.isna().sum()), "threads": ", ".join(map(str, sorted(group.threads.unique()))),
                "device": ", ".join(sorted(group.device.unique()))}

    rows = sorted(({"task": task, **summary(group)} for task, group in runs.groupby("task")), key=lambda row: (-row["hours"], row["task"]))
    return pd.DataFrame(rows + ([{"task": "all", **summary(runs)}] if rows else []),
                        columns=["task", "runs", "encodings", "seeds", "hours", "minutes per run", "fastest", "slowest", "untimed", "threads", "device"])


def render_run_times(table: Tables) -> str:
    """:func:`run_times` in Markdown; the ``untimed`` column only when a run has no stages."""
    times = run_times(table).round({"hours": 2, "minutes per run": 1, "fastest": 1, "slowest": 1})
    if times.empty:
        return RUN_TIME_TITLE + "\n\nNo protocol 2 run at the cards' settings yet.\n"
    if not times.untimed.any():
        times = times.drop(columns="untimed")
    return RUN_TIME_TITLE + "\n\n" + tabulate(times, headers="keys", tablefmt="github", showindex=False, floatfmt="g") + "\n"


def plot(name: str, table: Tables, runs: pd.DataFrame, path: Path) -> None:
    """PNG of the primary metric against length, one line per encoding: mean over runs with its
    95% interval as a band, per length (per bucket, at its midpoint, for text metrics); the
    training lengths shaded; encodings not ranked (most runs did not learn ID) dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = runs["primary"].iloc[0]
    points = _plot_points(table, runs, metric)
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=100)
    colors = plt.get_cmap("tab20").colors
    for index, (encoding, group) in enumerate(runs.groupby("encoding", sort=True)):
        values = points[points.run.isin(group.run)].groupby("x")["value"]
        mean, half = values.mean(), values.agg(interval).fillna(0)
        color = colors[index % len(colors)]
        style = "-" if ranked(group["learned"]) else "--"
        axes.plot(mean.index, mean, style, marker="o", markersize=2, linewidth=1.2, label=encoding, color=color)
        axes.fill_between(mean.index, mean - half, mean + half, color=color, alpha=0.12, linewidth=0)
    lo, hi = runs["train_lo"].iloc[0], runs["train_hi"].iloc[0]
    axes.axvspan(lo - 0.5, hi + 0.5, color="grey", alpha=0.15, label=f"training lengths ({lo}-{hi})")
    per = "bucket midpoints" if METRICS[metric].kind == "text" else "per length"
    axes.set(xlabel=f"length ({runs['unit'].iloc[0]}; {per})", ylabel=metric,
             title=f"{name}: {metric} against length (mean and 95% interval over runs; dashed: not ranked)")
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


def plot_positions(name: str, table: Tables, runs: pd.DataFrame, path: Path) -> None:
    """PNG of a language model's loss against the position in the window, at each evaluation
    length (a panel each), one line per encoding (mean over runs), the training length marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = table.positions[table.positions.run.isin(runs.run)].merge(runs[["run", "encoding"]], on="run")
    lengths = sorted(points["length"].unique())
    figure, panels = plt.subplots(1, len(lengths), figsize=(3.2 * len(lengths) + 2, 3.6), dpi=100, squeeze=False)
    colors = plt.get_cmap("tab20").colors
    for axes, length in zip(panels[0], lengths):
        for index, (encoding, rows) in enumerate(points[points.length == length].groupby("encoding", sort=True)):
            mean = rows.groupby("position")["loss"].mean()
            axes.plot(mean.index, mean, linewidth=1, color=colors[index % len(colors)], label=encoding)
        axes.axvline(runs["train_hi"].iloc[0], color="black", linestyle="--", linewidth=1)
        axes.set(title=f"context {length}", xlabel="position in the window", ylabel="loss (nats)" if length == lengths[0] else None)
        axes.grid(alpha=0.3)
    panels[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.suptitle(f"{name}: loss by position, nonoverlapping windows (dashed: the training length)")
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def plot_curves(name: str, table: Tables, runs: pd.DataFrame, path: Path) -> None:
    """PNG of the training curves: the mean training loss and the ID validation score of the
    primary metric against the step, one line per run (coloured by encoding), the ID target
    marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = table.curves[table.curves.run.isin(runs.run)].merge(runs[["run", "encoding"]], on="run")
    figure, (loss_axes, score_axes) = plt.subplots(1, 2, figsize=(12, 4.2), dpi=100)
    colors = plt.get_cmap("tab20").colors
    for index, (encoding, rows) in enumerate(curves.groupby("encoding", sort=True)):
        for number, (_, run) in enumerate(rows.groupby("run", sort=True)):
            label = encoding if number == 0 else None
            loss_axes.plot(run["step"], run["loss"], linewidth=1, color=colors[index % len(colors)], label=label)
            score_axes.plot(run["step"], run["validation"], linewidth=1, color=colors[index % len(colors)])
    target = runs["target"].iloc[0]
    if pd.notna(target):
        score_axes.axhline(target, color="black", linestyle="--", linewidth=1)
    loss_axes.set(xlabel="step", ylabel="training loss", yscale="log", title="mean training loss since the last validation")
    score_axes.set(xlabel="step", ylabel=runs["primary"].iloc[0],
                   title="ID validation score" + (f" (dashed: the target, {target:g})" if pd.notna(target) else ""))
    for axes in (loss_axes, score_axes):
        axes.grid(alpha=0.3)
    loss_axes.legend(fontsize=7)
    figure.suptitle(f"{name}: training curves, one line per run")
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


def _plot_points(table: Tables, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """(run, x, value) of ``metric``: per length where recorded, else per bucket midpoint (an
    open last bucket at 1.25x its lower edge)."""
    lengths = table.lengths[table.lengths.run.isin(runs.run) & (table.lengths.metric == metric)]
    if METRICS[metric].kind != "text" and not lengths.empty:
        return lengths.rename(columns={"length": "x"})[["run", "x", "value"]].astype({"value": float})
    buckets = table.scores[table.scores.run.isin(runs.run) & (table.scores.metric == metric) & (table.scores.order >= 2)]
    x = [(lo + hi) / 2 if hi != float("inf") else 1.25 * lo for lo, hi in zip(buckets["lo"], buckets["hi"])]
    return pd.DataFrame({"run": buckets["run"], "x": x, "value": buckets["value"].astype(float)})


def report_name(runs: pd.DataFrame) -> str:
    """The file name of a table: its task label, ``.protocol1`` for protocol 1 records."""
    return runs["table"].iloc[0] + (".protocol1" if runs["protocol"].iloc[0] == 1 else "")


def write_reports(records: list[dict], out: Path, throughput: pd.DataFrame | None = None) -> dict[str, str]:
    """Write, for every table, ``<out>/<name>.{md,tex,html}`` (the rendered leaderboards),
    ``<name>.csv`` (every metric, a ``metric`` column) and ``<name>.png``; ``overall.*``; the
    legend of configuration labels (``legend.md``) when there are any; the validity section
    (``validity.md``); the run time per task (``runtime.md``, :func:`run_times`); and, when
    there are Chomsky runs, their matrix (``chomsky.md`` and ``.csv``, :func:`suite_scores`).
    All or nothing: the files are made in a folder beside ``out`` that replaces it whole, so a failure leaves the last report as it was. Returns the terminal
    rendering of each table.

    Raises:
        ValueError: if no record is a successful run.
    """
    from .validity import validity_section

    table = tables(records)
    if table.runs.empty:
        raise ValueError("no successful run among the records")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        printed = _write_all(table, records, staging, throughput)
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


def _write_all(table: Tables, records: list[dict], out: Path, throughput: pd.DataFrame | None) -> dict[str, str]:
    printed = {}
    for _, runs in sorted(table.runs.groupby(["table", "protocol"]), key=lambda item: (item[0][1] != 2, item[0][0])):
        name = report_name(runs)
        boards = boards_of(table, runs, throughput)
        for suffix, table_format in FORMATS.items():
            (out / f"{name}.{suffix}").write_text(render(name, table, runs, boards, table_format))
        frame = pd.concat([board.assign(metric=metric) for metric, board in boards.items()], ignore_index=True)
        frame[["metric", *frame.columns[:-1]]].to_csv(out / f"{name}.csv", index=False, float_format="%.6g")
        plot(name, table, runs, out / f"{name}.png")
        if table.curves.run.isin(runs.run).any():
            plot_curves(name, table, runs, out / f"{name}.curves.png")
        if table.positions.run.isin(runs.run).any():
            plot_positions(name, table, runs, out / f"{name}.positions.png")
        printed[name] = render(name, table, runs, boards, "simple")
    ranked = ranked_runs(table)
    if not ranked.empty:
        blocks, encodings = overall_groups(table), sorted(ranked.encoding.unique())
        for suffix, table_format in FORMATS.items():
            (out / f"overall.{suffix}").write_text(render_overall(blocks, encodings, table_format))
        overall_csv(blocks).to_csv(out / "overall.csv", index=False, float_format="%.6g")
        printed["overall"] = render_overall(blocks, encodings, "simple")
    labels = legend(records)
    if labels:
        rows = [[label, ", ".join(f"{key}={value}" for key, value in settings.items())] for label, settings in labels.items()]
        (out / "legend.md").write_text("Configuration labels: the settings that differ from the cards\n\n" + tabulate(rows, ["label", "settings"], tablefmt="github") + "\n")
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
