"""The validity section: published claims about length generalization, set beside what pebench
measures, each with a verdict.

Each claim rests on comparisons: one encoding's OOD score against another's, or against a
threshold. A comparison *holds* when the 95% interval of the difference lies wholly on the
claim's side (excludes 0), *fails* when it lies wholly on the other side or at 0 (a tie
measured at every seed refutes a strict order), and is *unsure* otherwise, including a
comparison made at one seed, which has no interval. Differences of two encodings on one task are
paired by seed (Student's t over the per-seed differences, :func:`paired_difference`), and so are
MRRs (the MRR at each seed alone, :func:`kazemnejad_order`).

Verdicts: *reproduced* (the claim's comparisons hold), *not reproduced* (they fail: one of an
"every" claim, at least half of a "most" claim), *inconclusive* (neither at these seeds: more seeds would
decide), *not comparable* (pebench has not measured what the claim needs: a task or encoding not
run, or not learned ID on most runs). Every figure comes from the protocol 2 records of the
cards' own settings, through the leaderboards' own per-run scores (:func:`pebench.leaderboards.run_scores`,
:func:`pebench.leaderboards.leaderboard`), so the section changes only when the records do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tabulate import tabulate

from .cards import suite_tasks
from .leaderboards import counts_ood, leaderboard, overall, ranked_runs, run_scores
from .metrics import higher_is_better
from .results import Tables
from .statistics import interval

SYNTHETIC = suite_tasks("synthetic")
KAZEMNEJAD_ORDER = ("nope", "t5", "alibi", "rope", "sinusoidal")
KAZEMNEJAD_MRR = {"nope": 0.687, "t5": 0.549, "alibi": 0.502, "rope": 0.330, "sinusoidal": 0.215}
RANDOMIZED_PAIRS = {"randomized": "rope", "randomized_sinusoidal": "sinusoidal"}
RUOSS_TASKS = ("copy", "reverse") + suite_tasks("chomsky")  # theirs: the Chomsky suite
NEAR_ZERO = 0.05  # OOD exact match below this reads as "about 0"


@dataclass
class Verdict:
    measured: str
    verdict: str
    why: str = ""


@dataclass
class Claim:
    claim: str
    source: str
    published: str
    check: Callable[[Tables], Verdict]


def judge(low: float, high: float) -> str:
    """One comparison from the 95% interval (low, high) of (claimed better - claimed worse):
    "holds" (low > 0), "fails" (high <= 0) or "unsure" (otherwise, and for a NaN interval)."""
    return "holds" if low > 0 else "fails" if high <= 0 else "unsure"


def every(judged: list[str]) -> str:
    """The verdict of a claim that needs every comparison of ``judged`` to hold (none made: not
    comparable)."""
    if not judged:
        return "not comparable"
    return "reproduced" if all(j == "holds" for j in judged) else "not reproduced" if "fails" in judged else "inconclusive"


def most(judged: list[str]) -> str:
    """The verdict of a claim that needs more than half of ``judged`` to hold: reproduced when
    those that hold are most, not reproduced when they would not be even if every unsure one held
    (at least half fail), none made: not comparable."""
    if not judged:
        return "not comparable"
    holds, fails = judged.count("holds"), judged.count("fails")
    return "reproduced" if 2 * holds > len(judged) else "not reproduced" if 2 * (len(judged) - fails) <= len(judged) else "inconclusive"


def _counted_runs(table: Tables, task: str, encodings: list[str]) -> pd.DataFrame:
    """The runs of ``encodings`` on ``task`` that the claims use (:func:`ranked_runs`) and whose
    OOD scores count (:func:`counts_ood`)."""
    runs = ranked_runs(table)
    runs = runs[(runs.task == task) & runs.encoding.isin(encodings)]
    return runs[counts_ood(runs).to_numpy()]


def paired_scores(table: Tables, task: str, a: str, b: str, metric: str | None = None) -> tuple[pd.DataFrame, str]:
    """The OOD scores of a and b on ``task`` (protocol 2, the cards' settings) at the seeds where
    both have a run that counts (learned ID): a frame [seeds, (a, b)], and the metric scored
    (``metric``, or the task's primary one)."""
    runs = _counted_runs(table, task, [a, b])
    if runs.empty:
        return pd.DataFrame(columns=[a, b], dtype=float), metric or ""
    scored = metric or runs["primary"].iloc[0]
    by_seed = pd.DataFrame({"seed": runs.seed.to_numpy(), "encoding": runs.encoding.to_numpy(), "ood": run_scores(table, runs, scored)["OOD"].to_numpy()})
    return by_seed.pivot_table(index="seed", columns="encoding", values="ood", aggfunc="mean").reindex(columns=[a, b]).dropna(), scored


def _difference(wide: pd.DataFrame, scored: str) -> tuple[float, float, int]:
    """The mean of (a - b) over the rows of :func:`paired_scores`' frame [seeds, (a, b)], turned
    around where ``scored`` is lower-better, its 95% Student-t half-width and the seeds."""
    a, b = wide.columns
    difference = (wide[a] - wide[b]) * (1 if higher_is_better(scored) else -1)
    return (float(difference.mean()) if len(difference) else float("nan")), interval(difference), len(difference)


def paired_difference(table: Tables, task: str, a: str, b: str, metric: str | None = None) -> tuple[float, float, int]:
    """How much better a's OOD score is than b's on ``task``, over :func:`paired_scores`' seeds:
    a - b, or b - a for a metric where lower is better (perplexity, bits): the mean difference,
    its 95% Student-t half-width (NaN at one seed) and the number of seeds (0: mean NaN)."""
    return _difference(*paired_scores(table, task, a, b, metric))


def _judged(wide: pd.DataFrame, scored: str) -> tuple[str, str]:
    """judge(a better than b) from the paired frame and the difference as text, e.g.
    "+0.167 ± 0.050, 3 seeds"."""
    mean, half, seeds = _difference(wide, scored)
    if not seeds:
        return "unsure", "no seed at which both learned ID"
    shown = f"{mean:+.3f}" + ("" if np.isnan(half) else f" ± {half:.3f}") + f", {seeds} seed{'s' if seeds != 1 else ''}"
    return judge(mean - half, mean + half), shown


def _judge_pair(table: Tables, task: str, a: str, b: str, metric: str | None = None) -> tuple[str, str]:
    """judge(a better than b on task) and the difference as text (:func:`_judged`)."""
    return _judged(*paired_scores(table, task, a, b, metric))


def _versus(table: Tables, task: str, a: str, b: str) -> tuple[str, str]:
    """judge(a better than b on task) and both means at the seeds the difference pairs, with the
    difference, e.g. "a 0.258 vs b 0.091 (+0.167 ± 0.119, 3 seeds)": the two means differ by it."""
    wide, scored = paired_scores(table, task, a, b)
    result, shown = _judged(wide, scored)
    if wide.empty:
        return result, f"{a} vs {b} ({shown})"
    means = wide.mean()
    return result, f"{a} {means[a]:.3f} vs {b} {means[b]:.3f} ({shown})"


def _board(table: Tables, task: str, metric: str | None = None) -> pd.DataFrame | None:
    """The protocol 2 leaderboard of ``task`` at the cards' settings, indexed by encoding."""
    runs = ranked_runs(table)
    runs = runs[runs.task == task]
    if runs.empty:
        return None
    return leaderboard(table, runs, metric or runs["primary"].iloc[0]).set_index("encoding")


def _learned(board: pd.DataFrame, encoding: str) -> bool:
    return encoding in board.index and bool(board.loc[encoding, "ranked"])


def kazemnejad_order(table: Tables) -> Verdict:
    """The five encodings' MRR over the four synthetic tasks on OOD exact match (the published
    figures' metric), at each seed where all five ran all four, alone (:func:`pebench.leaderboards.overall`
    of that seed's runs): shown as its mean over those seeds, each pair in the paper's order
    judged on its per-seed difference, Student-t over the seeds (:func:`judge`; one seed:
    unsure). One statistic for both, so the order shown is the order judged; at more than one
    seed it can differ from the overall table's MRR, which ranks seed-averaged scores."""
    runs = ranked_runs(table)
    runs = runs[runs.card.isin(KAZEMNEJAD_ORDER) & (runs.encoding == runs.card) & runs.task.isin(SYNTHETIC)]
    needed = {(task, encoding) for task in SYNTHETIC for encoding in KAZEMNEJAD_ORDER}
    seeds = sorted(seed for seed, group in runs.groupby("seed") if needed <= set(zip(group.task, group.encoding)))
    if not seeds:
        return Verdict("—", "not comparable", "no seed at which the five encodings all have protocol 2 runs on every decoder-only synthetic task")
    per_seed = pd.DataFrame(
        {seed: overall(dataclasses.replace(table, runs=runs[runs.seed == seed]), "exact_match").set_index("encoding").MRR for seed in seeds}
    ).reindex(list(KAZEMNEJAD_ORDER))  # [encodings, seeds]
    mrr = per_seed.mean(axis=1).sort_values(ascending=False, kind="stable")  # best first; ties in the paper's order

    def order(a: str, b: str) -> str:
        return "=" if np.isclose(mrr[a], mrr[b]) else ">" if mrr[a] > mrr[b] else "<"

    def judged(a: str, b: str) -> str:
        difference = per_seed.loc[a] - per_seed.loc[b]
        half = interval(difference)
        return judge(difference.mean() - half, difference.mean() + half)

    ranked = list(mrr.index)
    counted = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
    measured = (
        f"{ranked[0]} {mrr[ranked[0]]:.3f}"
        + "".join(f" {order(a, b)} {b} {mrr[b]:.3f}" for a, b in zip(ranked, ranked[1:]))
        + f" (MRR of OOD exact match over {', '.join(sorted(SYNTHETIC))} at each seed, mean over {counted})"
    )
    pairs = {(a, b): judged(a, b) for i, a in enumerate(KAZEMNEJAD_ORDER) for b in KAZEMNEJAD_ORDER[i + 1 :]}
    shown = {result: [f"{a} {order(a, b)} {b}" for (a, b), r in pairs.items() if r == result] for result in ("fails", "unsure")}
    why = "; ".join(
        part
        for part in (
            "the order differs: " + ", ".join(shown["fails"]) + " here" if shown["fails"] else "",
            f"within the interval of the per-seed MRR difference ({counted}): " + ", ".join(shown["unsure"]) if shown["unsure"] else "",
        )
        if part
    )
    return Verdict(measured, every(list(pairs.values())), why)


def randomized_beats_base(table: Tables) -> Verdict:
    """A randomized card against its base, one comparison per task and pair of cards where both
    learned ID, over Ruoss et al.'s Chomsky tasks and copy, reverse; the claim is "on most
    tasks" (:func:`most`), each comparison paired by seed, each mean shown over the seeds it
    pairs (so a pair's two means differ by its difference)."""
    cells, judged, failed, missing = [], [], [], []
    for task in RUOSS_TASKS:
        board = _board(table, task)
        for randomized, base in RANDOMIZED_PAIRS.items():
            if board is None or not (_learned(board, randomized) and _learned(board, base)):
                missing.append(f"{randomized}/{base} on {task}")
                continue
            result, shown = _versus(table, task, randomized, base)
            judged.append(result)
            cells.append(f"{task}: {shown}")
            if result != "holds":
                failed.append(f"{task} ({randomized}, {result})")
    if not cells:
        return Verdict("—", "not comparable", "no randomized card and its base both learned ID on any of their tasks")
    measured = f"better beyond the interval on {judged.count('holds')} of {len(judged)}: " + "; ".join(cells)
    why = "; ".join(
        part
        for part in (
            "not better beyond the interval on: " + ", ".join(failed) if failed else "",
            f"{len(missing)} other pairs not learned or not run" if missing else "",
        )
        if part
    )
    return Verdict(measured, most(judged), why)


def learned_fails_past_training(table: Tables) -> Verdict:
    """About 0 on every synthetic task where learned positions learned ID: the 95% interval of
    its mean OOD exact match wholly below :data:`NEAR_ZERO` (one run: no interval, unsure)."""
    cells, judged, high = [], [], []
    for task in SYNTHETIC:
        board = _board(table, task, "exact_match")
        if board is None or not _learned(board, "learned"):
            continue
        value, half = board.loc["learned", "OOD mean"], board.loc["learned", "OOD ci"]
        cells.append(f"{task} {value:.3f}" + ("" if np.isnan(half) else f" ± {half:.3f}"))
        judged.append(judge(NEAR_ZERO - value - half, NEAR_ZERO - value + half))
        if judged[-1] != "holds":
            high.append(task)
    if not cells:
        return Verdict("—", "not comparable", "learned did not learn ID on most runs of any synthetic task")
    measured = "OOD exact match: " + ", ".join(cells)
    return Verdict(measured, every(judged), f"interval not wholly below {NEAR_ZERO} on {', '.join(high)}" if high else "")


def nope_best_on_sort(table: Tables) -> Verdict:
    """NoPE ahead of every other encoding ranked on sort, each comparison paired by seed; the
    board's means beside the runner-up's comparison at the seeds it pairs."""
    board = _board(table, "sort")
    if board is None or not _learned(board, "nope"):
        return Verdict("—", "not comparable", "NoPE has no ranked protocol 2 runs on sort")
    rivals = [e for e in board.index[board["rank"].notna()] if e != "nope"]
    judged = {rival: _versus(table, "sort", "nope", rival) for rival in rivals}
    runner_up = board.loc[rivals, "OOD mean"].idxmax() if rivals else None
    measured = f"sort OOD: nope {board.loc['nope', 'OOD mean']:.3f} (rank {board.loc['nope', 'rank']:g})" + (
        f"; best other {runner_up} {board.loc[runner_up, 'OOD mean']:.3f}; at the seeds both learned: {judged[runner_up][1]}" if runner_up else ""
    )
    ahead = [rival for rival, (result, _) in judged.items() if result == "fails"]
    unsure = [rival for rival, (result, _) in judged.items() if result == "unsure"]
    why = "; ".join(
        part
        for part in (
            "as good as NoPE or better beyond the interval: " + ", ".join(ahead) if ahead else "",
            "not separated from NoPE by the interval: " + ", ".join(unsure) if unsure else "",
        )
        if part
    )
    return Verdict(measured, every([result for result, _ in judged.values()]), why)


PRESS_FACTOR = 2.0  # perplexity at 16x over 1x above this: "explodes"
PRESS_FLAT = 1.1  # and below this: "stays flat"


def _growth(table: Tables, encoding: str, longest: str) -> tuple[float, float]:
    """Perplexity at the ``longest`` bucket over perplexity at the training context, per run of
    ``encoding`` on lm_long: the mean ratio and its 95% Student-t half-width."""
    runs = _counted_runs(table, "lm_long", [encoding])
    scores = run_scores(table, runs, runs["primary"].iloc[0])
    ratios = scores[longest] / scores["ID"]
    return float(ratios.mean()), interval(ratios)


def press_sinusoidal_explodes_alibi_flat(table: Tables) -> Verdict:
    """Sinusoidal's perplexity at the longest bucket over that at the training context above
    :data:`PRESS_FACTOR`, ALiBi's below :data:`PRESS_FLAT`, each ratio's interval over runs
    wholly on the claimed side."""
    board = _board(table, "lm_long")
    if board is None or not all(e in board.index for e in ("sinusoidal", "alibi")):
        return Verdict("—", "not comparable", "sinusoidal and ALiBi have no protocol 2 runs on lm_long")
    lengths = [column[: -len(" mean")] for column in board.columns if column.endswith(" mean") and column[0].isdigit()]
    longest = lengths[-1]
    (sinusoidal, s_half), (alibi, a_half) = _growth(table, "sinusoidal", longest), _growth(table, "alibi", longest)

    def shown(ratio: float, half: float) -> str:
        return f"x{ratio:.2f}" + ("" if np.isnan(half) else f" ± {half:.2f}")

    measured = (
        f"perplexity at the training context -> at {longest}: sinusoidal {board.loc['sinusoidal', 'ID mean']:.2f} -> "
        f"{board.loc['sinusoidal', f'{longest} mean']:.2f} ({shown(sinusoidal, s_half)} per run), ALiBi "
        f"{board.loc['alibi', 'ID mean']:.2f} -> {board.loc['alibi', f'{longest} mean']:.2f} ({shown(alibi, a_half)} per run)"
    )
    explodes = judge(sinusoidal - s_half - PRESS_FACTOR, sinusoidal + s_half - PRESS_FACTOR)
    flat = judge(PRESS_FLAT - alibi - a_half, PRESS_FLAT - alibi + a_half)
    why = "; ".join(
        part
        for part in (
            f"sinusoidal grows {shown(sinusoidal, s_half)}, not wholly over x{PRESS_FACTOR:g}" if explodes != "holds" else "",
            f"ALiBi grows {shown(alibi, a_half)}, not wholly under x{PRESS_FLAT:g}" if flat != "holds" else "",
        )
        if part
    )
    return Verdict(measured, every([explodes, flat]), why)


def relative_beats_absolute_on_long_sentences(table: Tables) -> Verdict:
    """Shaw's relative encoding against sinusoidal in corpus BLEU on the test sentences longer
    than the training ones (wmt_long's OOD split; no ID target there), paired by seed. The
    papers' own test is over sentences at one seed; pebench keeps no hypotheses in its records,
    so one seed here has no interval."""
    board = _board(table, "wmt_long")
    if board is None or not all(e in board.index for e in ("relative", "sinusoidal")):
        return Verdict("—", "not comparable", "relative and sinusoidal have no protocol 2 runs on wmt_long")
    ood, within = board["OOD mean"], board["ID mean"]
    result, difference = _judge_pair(table, "wmt_long", "relative", "sinusoidal")
    measured = (
        f"wmt_long BLEU past the training lengths: relative {ood['relative']:.2f} vs sinusoidal {ood['sinusoidal']:.2f} "
        f"(difference {difference}; within: {within['relative']:.2f} vs {within['sinusoidal']:.2f})"
    )
    why = {
        "holds": "",
        "fails": "sinusoidal translates the long sentences as well or better at this scale",
        "unsure": "the difference is within its interval, or measured at one seed (no interval)",
    }[result]
    return Verdict(measured, every([result]), why)


KAZEMNEJAD_SCAN = {"nope": 0.80, "t5": 0.80, "alibi": 0.44, "rope": 0.28, "sinusoidal": 0.06}


def kazemnejad_scan(table: Tables) -> Verdict:
    """Every pair the paper separates by more than 0.05 in the same order here, paired by seed,
    over the encodings that learned SCAN's training lengths."""
    board = _board(table, "scan_length")
    ranked = [e for e in KAZEMNEJAD_SCAN if board is not None and _learned(board, e)]
    if len(ranked) < 2:
        return Verdict("—", "not comparable", "fewer than two of NoPE, T5, ALiBi, RoPE and sinusoidal learned SCAN's training lengths")
    measured = "OOD exact match: " + ", ".join(f"{e} {board.loc[e, 'OOD mean']:.2f}" for e in ranked)
    pairs = [(a, b) for a in ranked for b in ranked if KAZEMNEJAD_SCAN[a] - KAZEMNEJAD_SCAN[b] > 0.05]
    judged = {pair: _judge_pair(table, "scan_length", *pair)[0] for pair in pairs}
    missing = [e for e in KAZEMNEJAD_SCAN if e not in ranked]
    why = "; ".join(
        part
        for part in (
            "the order differs: " + ", ".join(f"{a} <= {b}" for (a, b), j in judged.items() if j == "fails") if "fails" in judged.values() else "",
            "within the interval: " + ", ".join(f"{a} > {b}" for (a, b), j in judged.items() if j == "unsure") if "unsure" in judged.values() else "",
            "not learned or not run: " + ", ".join(missing) if missing else "",
        )
        if part
    )
    return Verdict(measured, every(list(judged.values())), why)


CLAIMS = (
    Claim(
        "NoPE > T5 > ALiBi > RoPE > sinusoidal (decoder-only, mean reciprocal rank over tasks)",
        "Kazemnejad et al. 2023, arXiv:2305.19466 (NeurIPS)",
        ", ".join(f"{e} {m}" for e, m in KAZEMNEJAD_MRR.items()) + " (their tasks, train <= 20, test 21-40, exact match)",
        kazemnejad_order,
    ),
    Claim(
        "randomized positions beat their base encoding out of distribution",
        "Ruoss et al. 2023, arXiv:2305.16843",
        "randomized > base on most tasks (encoder, per-sequence accuracy)",
        randomized_beats_base,
    ),
    Claim(
        "learned absolute positions score about 0 past the training lengths",
        "Ruoss et al. 2023; Kazemnejad et al. 2023",
        "about 0 beyond the trained positions",
        learned_fails_past_training,
    ),
    Claim("NoPE extrapolates best on sort-like tasks", "Kazemnejad et al. 2023", "NoPE first on sorting", nope_best_on_sort),
    Claim(
        "sinusoidal perplexity explodes past the training length, ALiBi's stays flat",
        "Press et al. 2022, arXiv:2108.12409, fig. 1",
        "sinusoidal rises steeply past L, ALiBi flat to 16x (WikiText-103)",
        press_sinusoidal_explodes_alibi_flat,
    ),
    Claim(
        "on SCAN's length split: NoPE ~ T5 > ALiBi > RoPE > sinusoidal",
        "Kazemnejad et al. 2023, arXiv:2305.19466",
        ", ".join(f"{e} {v}" for e, v in KAZEMNEJAD_SCAN.items()) + " (exact match)",
        kazemnejad_scan,
    ),
    Claim(
        "relative positions translate sentences longer than any in training better than absolute ones",
        "Rosendahl et al. 2019 (IWSLT); Neishi and Yoshinaga 2019 (CoNLL)",
        "relative ahead by 4.4-11.9% BLEU on sentences longer than the training ones, equal overall (WMT, Transformer)",
        relative_beats_absolute_on_long_sentences,
    ),
)


def validity_section(table: Tables) -> str:
    """The Markdown table of :data:`CLAIMS`: claim, source, published, pebench, verdict, why."""
    rows = []
    for claim in CLAIMS:
        verdict = claim.check(table)
        rows.append([claim.claim, claim.source, claim.published, verdict.measured, verdict.verdict, verdict.why or "—"])
    return (
        "Published claims against pebench's protocol 2 records (OOD scores: the primary metric, mean over the runs that learned ID; "
        "a difference: mean ± 95% Student-t half-width over the seeds at which both learned ID)\n\n"
        + tabulate(rows, ["claim", "source", "published", "pebench", "verdict", "why it differs"], tablefmt="github")
        + "\n"
    )
