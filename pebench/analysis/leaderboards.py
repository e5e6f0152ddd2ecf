"""The numbers of the leaderboards, from run records (:mod:`pebench.analysis.frames`): per task and
overall, rendered by :mod:`pebench.analysis.tables`, plotted by :mod:`pebench.analysis.plots`, written by
:mod:`pebench.analysis.report`.

One table per task and task settings and protocol (:mod:`pebench.analysis.frames`); one row per encoding
configuration. For the primary metric (and, in smaller tables, each other metric):
- *learned ID*: the runs that reached the ID validation target, of all runs (protocol 2); a task
  without a target (wmt_long) counts every run;
- *steps*: the median steps to the target over the runs that reached it;
- *ID*: the ID score, mean over every run;
- each OOD bucket and the *OOD* score (the mean over the OOD lengths, or the corpus score of the
  OOD sentences: :mod:`pebench.running.evaluation`), mean over the runs that learned ID only: a model that
  has not learned the training lengths says nothing about longer ones;
- *OOD/ID*: OOD mean over ID mean (of the same runs);
- throughput from the side-by-side benchmark (``pebench bench``, :mod:`pebench.bench.throughput`) at
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
few seeds a percentile bootstrap has no small-sample correction and is narrower than a
Student-t interval: it shows the spread over seeds, and :mod:`pebench.analysis.verdicts` tests
differences with Student's t instead. Only protocol 2 tables
of the cards' own task settings enter the overall ranking. An MRR compares encodings only over
one set of runs and one field of rivals, so the overall ranking comes in *blocks*: encodings that
all ran the same tasks at the same seeds, ranked among themselves on those runs
(:func:`overall_groups`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy import stats

from pebench.analysis.frames import Frames
from pebench.analysis.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE, interval, reciprocal_ranks, seed_draws
from pebench.config.cards import suite_of
from pebench.core.metrics import higher_is_better
from pebench.records.versions import RANKED_PROTOCOL

BENCH_LENGTH = 256
EXTRAPOLATION_THRESHOLDS = (0.95, 0.5)  # τ of the extrapolation length


def ranked(learned: pd.Series) -> bool:
    """Whether an encoding's runs count on a task: more than half learned ID (True), or the
    task has no target (None for every run)."""
    if learned.isna().all():
        return True
    return bool(learned.fillna(False).astype(bool).sum() * 2 > len(learned))


def counts_ood(runs: pd.DataFrame) -> pd.Series:
    """The runs whose OOD scores count: those that learned ID, or every run without a target."""
    return runs["learned"].isna() | runs["learned"].fillna(False).astype(bool)


def run_scores(table: Frames, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per run of ``runs``: the value of ``metric`` at ID, each bucket, OOD."""
    scores = table.scores[table.scores.run.isin(runs.run) & (table.scores.metric == metric)]
    order = scores.drop_duplicates("where").sort_values("order")["where"].tolist()
    wide = scores.pivot_table(index="run", columns="where", values="value", aggfunc="first", dropna=False)
    return wide.reindex(index=runs.run, columns=order).astype(float)


def leaderboard(table: Frames, runs: pd.DataFrame, metric: str, throughput: pd.DataFrame | None = None) -> pd.DataFrame:
    """The numeric leaderboard of one table's ``runs`` for ``metric``: per encoding, runs,
    learned, median steps to target, ``<column> mean`` and ``<column> ci`` (interval half-width)
    for ID, every bucket and OOD, OOD/ID, rank (NaN: not ranked), throughput and PE params. On
    the primary metric's board, also the extrapolation lengths (:func:`reach_columns`, over the
    runs that learned ID) and, for the Chomsky tasks, ``OOD best of seeds``: the highest OOD
    score of any run, learned ID or not, the statistic Delétang et al. (2023) and Ruoss et al.
    (2023) report (their maximum over 10 seeds; never used for ranks)."""
    wide = run_scores(table, runs, metric)
    ood_columns = [c for c in wide.columns if c not in ("ID", "OOD")][1:]  # the first bucket is ID
    primary = metric == runs["primary"].iloc[0]
    reach = reach_columns(table, runs) if primary else {}
    best_of_seeds = primary and suite_of(runs["task"].iloc[0]) == "chomsky"
    rows = []
    for encoding, group in runs.groupby("encoding", sort=True):
        values, counted = wide.loc[group.run], counts_ood(group).to_numpy()
        row = {
            "encoding": encoding,
            "runs": len(group),
            "learned": int(group["learned"].fillna(False).astype(bool).sum()),
            "target": group["target"].iloc[0],
            "ranked": ranked(group["learned"]),
            "steps": group.loc[group["steps_to_target"].notna(), "steps_to_target"].median(),
            "ID mean": values["ID"].mean(),
            "ID ci": interval(values["ID"]),
        }
        for column in [*ood_columns, "OOD"]:
            row[f"{column} mean"] = values[column][counted].mean() if counted.any() else float("nan")
            row[f"{column} ci"] = interval(values[column][counted])
        for column, ratios in reach.items():
            kept = ratios.loc[group.run][counted]
            row[f"{column} mean"], row[f"{column} ci"] = (kept.mean() if counted.any() else float("nan")), interval(kept)
        row["OOD/ID"] = row["OOD mean"] / values["ID"][counted].mean() if counted.any() and values["ID"][counted].mean() > 0 else float("nan")
        if best_of_seeds:
            row["OOD best of seeds"] = values["OOD"].max()
        row["PE params"] = group["encoding_parameters"].iloc[0]
        rows.append(row)
    board = pd.DataFrame(rows)
    rankable = runs["protocol"].iloc[0] == RANKED_PROTOCOL
    scored = board["ranked"] & board["OOD mean"].notna() & rankable
    higher_better = higher_is_better(metric)
    board["rank"] = board["OOD mean"].where(scored).rank(ascending=not higher_better, method="average")
    if throughput is not None:
        board = board.join(bench_columns(throughput, runs["architecture"].iloc[0]), on="encoding")
    return board.sort_values(["rank", "OOD mean", "ID mean"], ascending=[True, not higher_better, not higher_better], na_position="last").reset_index(drop=True)


def extrapolation_length(curve: pd.Series, train_hi: int, threshold: float) -> float:
    """ℓ*/L: the longest evaluated length ℓ* such that the score is at least ``threshold`` at
    every evaluated length from the longest training length L up to ℓ*, over L; 0 when the score
    is below it already at the first evaluated length from L, NaN when no length from L was
    evaluated. The field's statement of length generalization as a distance ("trained on 20
    digits, 99% at 100": McLeish et al. 2024; Cho et al. 2024; Zhou et al. 2024).

    Args:
        curve: score by length (index: lengths in the task's unit); NaN where the run has no
            score at a length the task evaluates (a length its encoding cannot represent), which
            counts as below the threshold.
        train_hi: L, the longest training length (the task's unit: the top of ``split.train``).
        threshold: τ, in the metric's units.

    Raises:
        ValueError: for an infinite score.
    """
    beyond = curve[curve.index >= train_hi].sort_index()
    if beyond.empty:
        return float("nan")
    values = beyond.to_numpy(dtype=float)
    if np.isinf(values).any():
        raise ValueError(f"a score by length is infinite: {beyond[np.isinf(values)].to_dict()}")
    below = ~(values >= threshold)  # NaN: not scored, below
    if not below.any():
        return float(beyond.index[-1] / train_hi)
    first = int(below.argmax())
    return 0.0 if first == 0 else float(beyond.index[first - 1] / train_hi)


def extrapolation_metric(runs: pd.DataFrame) -> str | None:
    """The metric the extrapolation length is measured on: per-sequence accuracy for one-pass
    (encoder) outputs, the Chomsky tasks' metric (Delétang et al. 2023), exact match for
    generated outputs (the decoder tasks' statement: "99% exact match at 100 digits"); None for a
    task that has not that metric by length (corpus BLEU, perplexity)."""
    metric = "sequence_accuracy" if runs["architecture"].iloc[0] == "encoder" else "exact_match"
    return metric if metric in runs["metrics"].iloc[0] else None


def on_diagonal(table: Frames, runs: pd.DataFrame) -> bool:
    """Whether ``runs`` scored a grid of two operand lengths, whose diagonal is their per-length
    curve (:func:`length_scores`)."""
    return bool(table.cells.run.isin(runs.run).any())


def reach_label(metric: str, threshold: float, diagonal: bool = False) -> str:
    """The header of an ℓ*/L column: the metric, τ and, for a grid task, that it reads the diagonal."""
    return f"ℓ*/L ({metric} ≥ {threshold:g}{', diagonal' if diagonal else ''})"


def length_scores(table: Frames, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The per-length curve of ``metric`` for ``runs``: rows (run, length, value). For a task
    that scores a grid of two operand lengths, its diagonal (both operands of n digits, the
    length the arithmetic papers state: "99% at 100 digits"); otherwise the per-length scores."""
    if on_diagonal(table, runs):
        cells = table.cells[table.cells.run.isin(runs.run) & (table.cells.metric == metric) & (table.cells.a == table.cells.b)]
        return cells.rename(columns={"a": "length"})[["run", "length", "value"]]
    return table.lengths[table.lengths.run.isin(runs.run) & (table.lengths.metric == metric)][["run", "length", "value"]]


def reach_columns(table: Frames, runs: pd.DataFrame) -> dict[str, pd.Series]:
    """Per threshold τ of :data:`EXTRAPOLATION_THRESHOLDS`, every run's ℓ*/L
    (:func:`extrapolation_length`) on :func:`extrapolation_metric`, over the lengths any run of
    the table was scored at (:func:`length_scores`: a grid task's diagonal):
    ``{"ℓ*/L (metric ≥ τ)": Series indexed by run}``; empty for a task without per-length scores
    of that metric."""
    metric = extrapolation_metric(runs)
    lengths = length_scores(table, runs, metric) if metric is not None else None
    if metric is None or lengths.empty:
        return {}
    wide = lengths.pivot_table(index="run", columns="length", values="value", aggfunc="first", dropna=False).reindex(index=runs.run).astype(float)
    train = runs.set_index("run")["train_hi"]
    diagonal = on_diagonal(table, runs)
    return {
        reach_label(metric, threshold, diagonal): pd.Series([extrapolation_length(wide.loc[run], train[run], threshold) for run in runs.run], index=runs.run)
        for threshold in EXTRAPOLATION_THRESHOLDS
    }


def bench_columns(throughput: pd.DataFrame, architecture: str) -> pd.DataFrame:
    """The benchmark's pebench rows at :data:`BENCH_LENGTH` in ``architecture``, indexed by
    encoding card: training tokens/s, training and evaluation step time over NoPE's. A
    configuration run with other settings (``name@hash``) has no row of its own."""
    rows = throughput[(throughput.implementation == "pebench") & (throughput.architecture == architecture) & (throughput.length == BENCH_LENGTH)]
    rows = rows.set_index("contender")
    return pd.DataFrame(
        {
            "train tok/s": rows["train_tokens_per_second"],
            "train step vs NoPE": rows["train_vs_nope"],
            "eval step vs NoPE": rows["eval_vs_nope"],
        }
    )


def metrics_of(runs: pd.DataFrame) -> list[str]:
    """The table's primary metric, then its other metrics."""
    primary = runs["primary"].iloc[0]
    return [primary, *[m for m in runs["metrics"].iloc[0] if m != primary]]


def boards_of(table: Frames, runs: pd.DataFrame, throughput: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """A table's leaderboards, built once and then rendered in every format: ``{metric: its
    :func:`leaderboard`}`` (one row per encoding), in :func:`metrics_of` order, throughput
    columns on the primary metric's only."""
    return {metric: leaderboard(table, runs, metric, throughput if index == 0 else None) for index, metric in enumerate(metrics_of(runs))}


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


def ranked_runs(table: Frames) -> pd.DataFrame:
    """The runs the overall ranking and the validity claims use: those of the ranked protocol
    (:data:`pebench.records.versions.RANKED_PROTOCOL`), at the cards' own task settings (a run
    with other buckets or budgets is a table of its own, never ranked)."""
    return table.runs[(table.runs.protocol == RANKED_PROTOCOL) & (table.runs.table == table.runs.task)]


def overall(table: Frames, metric: str | None = None) -> pd.DataFrame:
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
            raise ValueError(
                f"overall ranking of {task}: {', '.join(unpaired)} did not run every seed of {seeds.tolist()}; "
                "rank over the seeds all encodings ran (overall_groups)"
            )
        drawn = seed_draws(seeds, rng)  # [B, seeds], shared by every encoding: the pairing
        point_scores = np.array([_cell_scores(cells[e], ood.loc[cells[e].run], np.ones((1, len(cells[e]))))[0] if e in cells else np.nan for e in encodings])
        boot = np.stack(
            [
                _cell_scores(cells[e], ood.loc[cells[e].run], drawn[:, np.searchsorted(seeds, cells[e].seed)])
                if e in cells
                else np.full(BOOTSTRAP_RESAMPLES, np.nan)
                for e in encodings
            ],
            axis=1,
        )  # [B, encodings]
        point[task], samples[task] = reciprocal_ranks(point_scores), reciprocal_ranks(boot)
        ranks[task] = pd.Series(stats.rankdata(-point_scores[~np.isnan(point_scores)], method="average"), index=np.array(encodings)[~np.isnan(point_scores)])
        ran[task] = np.array([e in cells for e in encodings])
    if not point:
        return pd.DataFrame(columns=["encoding", "MRR", "MRR low", "MRR high", "tasks ranked", "tasks run"])
    ran_matrix = np.stack([ran[t] for t in point], axis=1)  # [encodings, tasks]
    runs_on = ran_matrix.sum(axis=1)
    mrr = (np.stack([point[t] for t in point], axis=1) * ran_matrix).sum(axis=1) / np.maximum(runs_on, 1)
    boot_mrr = (np.stack([samples[t] for t in point], axis=2) * ran_matrix[None]).sum(axis=2) / np.maximum(runs_on, 1)  # [B, encodings]
    result = pd.DataFrame(
        {
            "encoding": encodings,
            "MRR": mrr,
            "MRR low": np.percentile(boot_mrr, 100 * (1 - CONFIDENCE) / 2, axis=0),
            "MRR high": np.percentile(boot_mrr, 100 * (1 + CONFIDENCE) / 2, axis=0),
            "tasks ranked": [int(sum(e in ranks[t].index for t in point)) for e in encodings],
            "tasks run": runs_on,
        }
    )
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


def overall_groups(table: Frames, metric: str | None = None) -> list[RankingGroup]:
    """The overall ranking in complete blocks (see the module docstring), on each task's primary
    metric or on ``metric``.

    A block is a set of encodings E and a set of (task, seed) cells C such that every encoding of
    E has a run (protocol 2, the cards' settings) at every cell of C, C holds every cell they all
    share, and E every encoding that ran all of C: the formal concepts of the relation "has a run
    at", those of two encodings or more. Ranks and MRR are computed on those runs alone, so within
    a block every encoding is compared on the same tasks, at the same seeds, against the same
    rivals. Blocks come largest first (encodings x tasks), then by more encodings, their tasks,
    more runs each and their cells, an order that does not depend on hashing: two blocks of
    as many encodings on the same tasks at different seeds keep their places from one report to
    the next. A grid of tiers gives one block per tier."""
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
    return sorted(blocks, key=lambda b: (-len(b.ranking) * len(b.tasks), -len(b.ranking), b.tasks, -len(b.cells), sorted(b.cells)))


def suite_scores(table: Frames, levels: dict[str, tuple[str, ...]]) -> pd.DataFrame:
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
            rows += [
                {
                    "level": level,
                    "task": task,
                    "encoding": row.encoding,
                    "metric": metric,
                    "ranked": bool(row.ranked),
                    "rank": row["rank"],
                    "ID": row["ID mean"],
                    "OOD": row["OOD mean"],
                }
                for _, row in board.iterrows()
            ]
    return pd.DataFrame(rows, columns=["level", "task", "encoding", "metric", "ranked", "rank", "ID", "OOD"])


def run_times(table: Frames) -> pd.DataFrame:
    """Per task, most hours first, then ``all``: runs, encodings, seeds, hours in all and
    minutes per run (mean, fastest, slowest) of :func:`ranked_runs`, learned ID or not (the
    ``run_seconds`` of :func:`pebench.analysis.frames.frames`; a record without stages is counted in
    ``runs`` and ``untimed``, not in the times), the cost of training (``train s / 1k steps``:
    the median over runs of training wall seconds, validation included, per 1,000 steps), and
    the threads and devices recorded."""
    runs = ranked_runs(table)

    def summary(group: pd.DataFrame) -> dict:
        minutes = group.run_seconds / 60
        return {
            "runs": len(group),
            "encodings": group.encoding.nunique(),
            "seeds": ", ".join(map(str, sorted(group.seed.unique()))),
            "hours": minutes.sum() / 60,
            "minutes per run": minutes.mean(),
            "fastest": minutes.min(),
            "slowest": minutes.max(),
            "train s / 1k steps": (group.wall_seconds / group.steps * 1000).median(),
            "untimed": int(minutes.isna().sum()),
            "threads": ", ".join(map(str, sorted(group.threads.unique()))),
            "device": ", ".join(sorted(group.device.unique())),
        }

    rows = sorted(({"task": task, **summary(group)} for task, group in runs.groupby("task")), key=lambda row: (-row["hours"], row["task"]))
    return pd.DataFrame(
        rows + ([{"task": "all", **summary(runs)}] if rows else []),
        columns=["task", "runs", "encodings", "seeds", "hours", "minutes per run", "fastest", "slowest", "train s / 1k steps", "untimed", "threads", "device"],
    )
