"""A researcher's encodings against baseline records (``pebench report --baseline DIR``).

The user's records are compared with a baseline folder's (by default the committed ``results/``
of the pebench checkout that is installed, :func:`pebench.records.paths.committed_results`), read and
never written: a baseline record joins the comparison only where its task card is the user's
record's, behaviour for behaviour (:func:`pebench.records.store.card_identity`: same split, buckets,
seeds, budget, model, metrics), and only for encodings the user did not run themselves (the
user's own run of a (task, encoding, seed) wins). Per task, each new encoding (one the baseline
has no record of) is paired by seed with every baseline encoding: the per-seed difference of
the OOD score of the task's primary metric, its Student-t interval and the outcome, judged as
the validity section judges a claim's pairs (:mod:`pebench.analysis.verdicts`: paired t test and TOST at
the metric's margin δ, Holm over the new encoding's pairs on that task; a pair needs both sides
to have learned ID on most runs). Then the new encoding's place in the overall ranking
(:func:`pebench.analysis.leaderboards.overall_groups`) of the pooled records.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd
from tabulate import tabulate

from pebench.analysis.checks import compare
from pebench.analysis.frames import Frames, frames
from pebench.analysis.leaderboards import overall_groups, ranked_runs
from pebench.analysis.verdicts import judge_pairs
from pebench.records.store import card_identity
from pebench.records.types import RunRecord


@dataclass(frozen=True)
class Pooled:
    """The user's records and the baseline records that join them; ``left_out``: per task, how
    many baseline records were left out because their task card differs from the user's."""

    records: list[RunRecord]
    candidates: list[str]
    left_out: dict[str, int]


def _key(record: RunRecord) -> tuple:
    return record.task["name"], record.encoding["name"], record.seed, record.config or ""


def pool(user: list[RunRecord], baseline: list[RunRecord]) -> Pooled:
    """The successful user records, and the successful baseline records of the tasks the user
    ran, at the user's task card, that the user's records do not replace; the candidates are the
    user's encodings the baseline has no record of.

    Raises:
        ValueError: when the user has no successful record, or ran one task with two cards
            (the comparison would not know which card the baseline must match).
    """
    user = [r for r in user if r.status == "ok"]
    if not user:
        raise ValueError("no successful run among your records: run `pebench sweep --encodings YOURS ...` first")
    cards: dict[str, dict] = {}
    for record in user:
        identity = card_identity(record.task)
        name = record.task["name"]
        if cards.setdefault(name, identity) != identity:
            raise ValueError(f"your records of task '{name}' come from two different task cards; compare one card at a time (a results folder each)")
    baseline = [r for r in baseline if r.status == "ok" and r.task["name"] in cards]
    same_card = [card_identity(r.task) == cards[r.task["name"]] for r in baseline]
    mine = {_key(r) for r in user}
    joined = [r for r, same in zip(baseline, same_card) if same and _key(r) not in mine]
    left_out = Counter(r.task["name"] for r, same in zip(baseline, same_card) if not same)
    known = {r.encoding["name"] for r in baseline}
    candidates = sorted({r.encoding["name"] for r in user} - known)
    return Pooled(user + joined, candidates, dict(left_out))


def paired_differences(table: Frames, candidates: list[str]) -> pd.DataFrame:
    """Per task and new encoding, one row per baseline encoding: the metric, the seeds paired,
    both means, the mean difference (positive: the new encoding better, whatever the metric's
    direction), its 95% interval and the outcome (holds: better; reversed: worse; equivalent;
    unresolved; "not compared" with the reason when a side did not learn ID on most runs)."""
    runs = ranked_runs(table)
    rows = []
    for task, task_runs in sorted(runs.groupby("task")):
        present = set(task_runs.encoding)
        for candidate in [c for c in candidates if c in present]:
            baselines = sorted(present - set(candidates))
            made = {b: compare(table, task, candidate, b) for b in baselines}
            tested = {b: c.test() for b, c in made.items() if c is not None}
            outcomes = dict(zip(tested, judge_pairs(list(tested.values()))))
            for b in baselines:
                comparison, test = made[b], tested.get(b)
                low, high = test.interval(0.95) if test else (math.nan, math.nan)
                rows.append(
                    {
                        "task": task,
                        "encoding": candidate,
                        "baseline": b,
                        "metric": comparison.metric if comparison else task_runs["primary"].iloc[0],
                        "seeds": test.n if test else 0,
                        "means": comparison.means if comparison else "—",
                        "difference": test.mean if test else math.nan,
                        "low": low,
                        "high": high,
                        "outcome": outcomes[b] if test else "not compared (a side did not learn ID on most runs)",
                    }
                )
    return pd.DataFrame(rows, columns=["task", "encoding", "baseline", "metric", "seeds", "means", "difference", "low", "high", "outcome"])


def overall_places(table: Frames, candidates: list[str]) -> pd.DataFrame:
    """Each new encoding's place in the largest block of the overall ranking that holds it: its
    rank (row) of the block's encodings, MRR with its 95% interval, and the block's tasks."""
    rows, blocks = [], overall_groups(table)
    for candidate in candidates:
        block = next((b for b in blocks if candidate in set(b.ranking.encoding)), None)
        if block is None:
            rows.append({"encoding": candidate, "place": "in no block (no baseline ran its tasks at its seeds)", "MRR": "—", "tasks": ""})
            continue
        ranking = block.ranking.reset_index(drop=True)
        row = ranking.index[ranking.encoding == candidate][0]
        mrr = ranking.loc[row]
        rows.append(
            {
                "encoding": candidate,
                "place": f"{row + 1} of {len(ranking)}",
                "MRR": f"{mrr['MRR']:.3f} ({mrr['MRR low']:.3f}-{mrr['MRR high']:.3f})",
                "tasks": ", ".join(block.tasks),
            }
        )
    return pd.DataFrame(rows, columns=["encoding", "place", "MRR", "tasks"])


TITLE = (
    "Your encodings against the baseline records, per task: the per-seed difference of the OOD score of the primary metric "
    "(positive: yours better), its 95% Student-t interval over the paired seeds and the outcome (paired t test and TOST at the "
    "metric's margin, Holm over an encoding's pairs on a task, as the validity section judges claims)"
)


def render_comparison(pooled: Pooled, baseline_name: str) -> str:
    """The comparison as Markdown: what was pooled, the paired differences, the overall places."""
    table = frames(pooled.records)
    if not pooled.candidates:
        return f"Baseline {baseline_name}: every encoding of your records is also a baseline encoding; nothing new to compare.\n"
    differences = paired_differences(table, pooled.candidates)
    shown = differences.assign(
        difference=differences.difference.map(lambda v: "—" if pd.isna(v) else f"{v:+.3f}"),
        interval=[("—" if pd.isna(lo) else f"[{lo:+.3f}, {hi:+.3f}]") for lo, hi in zip(differences.low, differences.high)],
    )[["task", "encoding", "baseline", "metric", "seeds", "means", "difference", "interval", "outcome"]]
    parts = [
        f"{TITLE}. Baseline: {baseline_name} (read only).",
        tabulate(shown, headers="keys", tablefmt="github", showindex=False, disable_numparse=True),
        "Place in the overall ranking (mean reciprocal rank over tasks, pooled records):",
        tabulate(overall_places(table, pooled.candidates), headers="keys", tablefmt="github", showindex=False, disable_numparse=True),
    ]
    if pooled.left_out:
        parts.append(
            "Baseline records left out, their task card differs from yours: "
            + ", ".join(f"{task} ({n})" for task, n in sorted(pooled.left_out.items()))
            + "; run at the cards' settings to compare with them"
        )
    return "\n\n".join(parts) + "\n"
