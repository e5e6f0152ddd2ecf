"""The seeds the validity claims need (``pebench plan``): per pair of :func:`pebench.analysis.claims.judged_claims`,
the seeds at which the paired t test has 80% power at the observed difference
(:func:`pebench.analysis.verdicts.seeds_for_power`); per task, the largest of those counts that does not
exceed :data:`pebench.analysis.verdicts.MAX_PLANNED_SEEDS`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from tabulate import tabulate

from pebench.analysis.claims import judged_claims
from pebench.analysis.frames import Frames
from pebench.analysis.leaderboards import ranked_runs, run_times
from pebench.analysis.verdicts import MAX_PLANNED_SEEDS, seeds_for_power


def seed_plan(table: Frames) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The seeds each claim's pairs need, from the records at hand: one row per pair (claim,
    pair, tasks, seeds, mean and s.d. of the differences, seeds for 80% power: None at one seed,
    or past 1,000), and one per task the pairs touch (seeds planned: the largest need of its pairs
    up to :data:`MAX_PLANNED_SEEDS`, never fewer than it has; the encodings of its pairs; the runs
    to add and their one-thread hours at the task's mean minutes per run so far)."""
    pairs, needs = [], {}
    for number, (_, measured, _) in enumerate(judged_claims(table), 1):
        for comparison in measured.comparisons:
            test = comparison.test()
            needed = seeds_for_power(test.mean, test.sd)
            pairs.append(
                {
                    "claim": number,
                    "pair": comparison.pair,
                    "tasks": ", ".join(comparison.tasks),
                    "seeds": test.n,
                    "mean": test.mean,
                    "sd": test.sd,
                    "seeds for 80% power": needed,
                }
            )
            for task in comparison.tasks:
                need = needs.setdefault(task, {"seeds": test.n, "encodings": set()})
                need["encodings"].update(comparison.encodings)
                if needed is not None and needed <= MAX_PLANNED_SEEDS:
                    need["seeds"] = max(need["seeds"], needed)
    minutes = run_times(table).set_index("task")["minutes per run"]
    runs = ranked_runs(table)
    rows = []
    for task, need in sorted(needs.items()):
        have = runs[(runs.task == task) & runs.encoding.isin(need["encodings"])]
        missing = len(need["encodings"]) * need["seeds"] - len(have[have.seed < need["seeds"]].drop_duplicates(["encoding", "seed"]))
        rows.append(
            {
                "task": task,
                "seeds planned": need["seeds"],
                "encodings": ",".join(sorted(need["encodings"])),
                "runs to add": missing,
                "hours": missing * minutes.get(task, np.nan) / 60,
            }
        )
    return pd.DataFrame(pairs), pd.DataFrame(rows)


def render_plan(table: Frames) -> str:
    """:func:`seed_plan` as Markdown: the pairs with their differences' mean and s.d. and the
    seeds each needs, the seeds and runs per task, and the ``pebench sweep`` commands that run them."""
    pairs, tasks = seed_plan(table)
    if pairs.empty:
        return "No claim makes a pair on these records: nothing to plan.\n"
    shown = pairs.assign(
        mean=pairs["mean"].map("{:+.3f}".format),
        sd=pairs["sd"].map(lambda sd: "—" if math.isnan(sd) else f"{sd:.3f}"),
        **{"seeds for 80% power": [_need(n, seeds) for n, seeds in zip(pairs["seeds for 80% power"], pairs["seeds"], strict=True)]},
    )
    to_run = tasks[tasks["runs to add"] > 0]
    commands = "\n".join(
        f"pebench sweep --tasks {row['task']} --encodings {row['encodings']} --seeds 0-{row['seeds planned'] - 1} --results results --threads 1"
        for _, row in to_run.iterrows()
    )
    return (
        f"Seeds for 80% power at α = 0.05 (exact paired t test) at each pair's observed mean difference and s.d. over the seeds "
        f"it pairs; per task, the largest need of its pairs up to {MAX_PLANNED_SEEDS} seeds\n\n"
        + tabulate(shown, headers="keys", tablefmt="github", showindex=False)
        + "\n\n"
        + tabulate(tasks.assign(hours=tasks.hours.map("{:.2f}".format)), headers="keys", tablefmt="github", showindex=False)
        + f"\n\n{to_run['runs to add'].sum()} runs, {to_run.hours.sum():.1f} one-thread hours at each task's mean minutes per run so far:\n\n"
        + f"```sh\n{commands}\n```\n"
    )


def _need(needed: float, seeds: int) -> str:
    if seeds < 2:
        return "— (one seed: no variance to plan from)"
    if needed is None or math.isnan(needed):
        return "> 1000 (judged by equivalence at the task's seeds)"
    return f"{int(needed)}" + ("" if needed <= MAX_PLANNED_SEEDS else " (judged by equivalence at the task's seeds)")
