"""The checks of the validity claims (:mod:`pebench.analysis.claims`): each measures a claim's
directed pairs on pebench's records, as the per-seed differences that
:mod:`pebench.analysis.verdicts` judges.

A pair says "a is better than b" on a task and metric (or "a's score is on the claimed side of a
threshold"). Its differences are a's OOD score minus b's at the same seed, turned around where
lower is better; for a threshold, the claimed side's distance from it.

δ, the equivalence margin: the metric's (:data:`pebench.core.metrics.METRICS`: 0.02 for accuracies,
0.5 BLEU points), :data:`MRR_MARGIN` for a difference of MRRs, :data:`RATIO_MARGIN` for a
perplexity ratio, :data:`REACH_MARGIN` for a difference of ℓ*/L.

An ordering of k encodings is its k - 1 adjacent pairs: the claim is exactly those (the others
follow from them), and every further pair would spend Holm's α on a consequence. Pairs are made
only where both encodings learned ID on most runs of the task, at the seeds where both learned it
(a model that has not learned the training lengths is never compared); the pairs a check could
not make are named. Every figure comes from the protocol 2 records of the cards' own settings,
through the leaderboards' own per-run scores (:func:`pebench.analysis.leaderboards.run_scores`), so a
check's result changes only when the records do. A check reads the suites' cards when it runs,
never at import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from pebench.analysis.frames import Frames
from pebench.analysis.leaderboards import counts_ood, leaderboard, overall, ranked_runs, reach_columns, reach_label, run_scores
from pebench.analysis.verdicts import PairTest, pair_test
from pebench.config.cards import suite_tasks
from pebench.core.metrics import METRICS, higher_is_better

KAZEMNEJAD_ORDER = ("nope", "t5", "alibi", "rope", "sinusoidal")
SCAN_PAIRS = (("nope", "alibi"), ("t5", "alibi"), ("alibi", "rope"), ("rope", "sinusoidal"))  # the order's adjacent pairs; NoPE ~ T5 claims no order
RANDOMIZED_PAIRS = {"randomized": "rope", "randomized_sinusoidal": "sinusoidal"}
NEAR_ZERO = 0.05  # OOD exact match below this reads as "about 0"
PRESS_FACTOR = 2.0  # perplexity at 16x over 1x above this: "explodes"
PRESS_FLAT = 1.1  # and below this: "stays flat"
MRR_MARGIN = 0.05  # δ of an MRR difference: a quarter of the gap between ranks 1 and 2 of five (1 - 1/2), the gap of ranks 4 and 5
RATIO_MARGIN = 0.1  # δ of a perplexity ratio (x0.1)
ARITHMETIC = "long_addition"  # the field's addition protocol (McLeish et al. 2024's format)
CLASSIC = ("nope", "rope", "randomized", "sinusoidal", "alibi", "t5", "fire")  # the encodings the arithmetic claims are held against
REACH_FACTOR = 5  # "at least 5x the training length": long_addition's grid ends at 5L
REACH_MARGIN = 0.5  # δ of an ℓ*/L difference on long_addition: one step of its grid past L (5 digits over L = 10)


@dataclass(frozen=True)
class Comparison:
    """One directed pair of a claim, measured.

    Args:
        pair: what is claimed, e.g. ``"nope > t5"`` or ``"learned < 0.05"``.
        tasks: the tasks it is measured on (a suite's tasks for an MRR).
        metric: what is compared, e.g. ``"exact_match"``, ``"MRR of exact_match"``.
        encodings: the encodings whose runs it needs.
        differences: per seed, how far the claimed side is ahead (positive: as claimed).
        margin: the equivalence margin δ, in the units of ``differences``.
        means: the two means at the paired seeds, e.g. ``"0.583 vs 0.616"``.
    """

    pair: str
    tasks: tuple[str, ...]
    metric: str
    encodings: tuple[str, ...]
    differences: tuple[float, ...]
    margin: float
    means: str

    def test(self) -> PairTest:
        return pair_test(self.differences, self.margin)


@dataclass(frozen=True)
class Measured:
    """What a claim's check found: its comparisons, and the pairs it could not make (why)."""

    comparisons: tuple[Comparison, ...] = ()
    not_compared: str = ""


def _counted_runs(table: Frames, task: str, encodings: list[str]) -> pd.DataFrame:
    """The runs of ``encodings`` on ``task`` that the claims use (:func:`ranked_runs`) and whose
    OOD scores count (:func:`counts_ood`)."""
    runs = ranked_runs(table)
    runs = runs[(runs.task == task) & runs.encoding.isin(encodings)]
    return runs[counts_ood(runs).to_numpy()]


def paired_scores(table: Frames, task: str, a: str, b: str, metric: str | None = None) -> tuple[pd.DataFrame, str]:
    """The OOD scores of a and b on ``task`` (protocol 2, the cards' settings) at the seeds where
    both have a run that counts (learned ID): a frame [seeds, (a, b)], and the metric scored
    (``metric``, or the task's primary one)."""
    runs = _counted_runs(table, task, [a, b])
    if runs.empty:
        return pd.DataFrame(columns=[a, b], dtype=float), metric or ""
    scored = metric or runs["primary"].iloc[0]
    by_seed = pd.DataFrame({"seed": runs.seed.to_numpy(), "encoding": runs.encoding.to_numpy(), "ood": run_scores(table, runs, scored)["OOD"].to_numpy()})
    return by_seed.pivot_table(index="seed", columns="encoding", values="ood", aggfunc="mean").reindex(columns=[a, b]).dropna(), scored


def _board(table: Frames, task: str, metric: str | None = None) -> pd.DataFrame | None:
    """The protocol 2 leaderboard of ``task`` at the cards' settings, indexed by encoding."""
    runs = ranked_runs(table)
    runs = runs[runs.task == task]
    if runs.empty:
        return None
    return leaderboard(table, runs, metric or runs["primary"].iloc[0]).set_index("encoding")


def _learned(board: pd.DataFrame | None, encoding: str) -> bool:
    return board is not None and encoding in board.index and bool(board.loc[encoding, "ranked"])


def compare(table: Frames, task: str, a: str, b: str, metric: str | None = None) -> Comparison | None:
    """a better than b on ``task``'s OOD score (``metric`` or the primary one), paired by seed;
    None unless both learned ID on most runs of the task."""
    board = _board(table, task)
    if not (_learned(board, a) and _learned(board, b)):
        return None
    wide, scored = paired_scores(table, task, a, b, metric)
    sign = 1 if higher_is_better(scored) else -1
    means = f"{wide[a].mean():.3f} vs {wide[b].mean():.3f}" if len(wide) else "—"
    return Comparison(f"{a} > {b}", (task,), scored, (a, b), tuple(sign * (wide[a] - wide[b])), METRICS[scored].margin, means)


def _pairs(table: Frames, wanted: list[tuple[str, str, str]], metric: str | None = None) -> Measured:
    """:func:`compare` of each (task, a, b) of ``wanted``; those not made are named."""
    made, missing = [], []
    for task, a, b in wanted:
        comparison = compare(table, task, a, b, metric)
        (made if comparison else missing).append(comparison or f"{a} > {b} on {task}")
    return Measured(tuple(made), "not learned ID on most runs, or not run: " + ", ".join(missing) if missing else "")


def _mrr_per_seed(table: Frames, tasks: tuple[str, ...]) -> pd.DataFrame | None:
    """Kazemnejad et al.'s five encodings' MRR of OOD exact match over ``tasks``, at each seed
    where all five ran all of them, alone (:func:`pebench.analysis.leaderboards.overall` of that seed's
    runs): [encodings, seeds]; None without such a seed."""
    runs = ranked_runs(table)
    runs = runs[runs.card.isin(KAZEMNEJAD_ORDER) & (runs.encoding == runs.card) & runs.task.isin(tasks)]
    needed = {(task, encoding) for task in tasks for encoding in KAZEMNEJAD_ORDER}
    seeds = sorted(seed for seed, group in runs.groupby("seed") if needed <= set(zip(group.task, group.encoding)))
    if not seeds:
        return None
    return pd.DataFrame(
        {seed: overall(dataclasses.replace(table, runs=runs[runs.seed == seed]), "exact_match").set_index("encoding").MRR for seed in seeds}
    ).reindex(list(KAZEMNEJAD_ORDER))


def mrr_order(suite: str, which: str) -> Callable[[Frames], Measured]:
    """The check of Kazemnejad et al.'s order on the tasks of ``suite`` (``which`` names them in
    what it says): the order's adjacent pairs on the per-seed MRR of OOD exact match
    (:func:`_mrr_per_seed`). MRR is the paper's statistic, and one MRR per seed pairs the
    encodings by seed."""

    def check(table: Frames) -> Measured:
        tasks = suite_tasks(suite)
        per_seed = _mrr_per_seed(table, tasks)
        if per_seed is None:
            return Measured(not_compared=f"no seed at which the five encodings all have protocol 2 runs on every task of {which}")
        return Measured(
            tuple(
                Comparison(
                    f"{a} > {b}",
                    tasks,
                    "MRR of exact_match",
                    KAZEMNEJAD_ORDER,
                    tuple(per_seed.loc[a] - per_seed.loc[b]),
                    MRR_MARGIN,
                    f"{per_seed.loc[a].mean():.3f} vs {per_seed.loc[b].mean():.3f}",
                )
                for a, b in zip(KAZEMNEJAD_ORDER, KAZEMNEJAD_ORDER[1:])
            )
        )

    return check


kazemnejad_order = mrr_order("synthetic", "the decoder-only synthetic suite")
kazemnejad_order_on_their_suite = mrr_order("kazemnejad", "the kazemnejad suite")


def randomized_beats_base(table: Frames) -> Measured:
    """Each randomized card against its base on each of Ruoss et al.'s tasks (theirs, and copy and reverse)."""
    tasks = ("copy", "reverse", *suite_tasks("chomsky"))
    return _pairs(table, [(task, randomized, base) for task in tasks for randomized, base in RANDOMIZED_PAIRS.items()])


def _below(table: Frames, task: str, encoding: str, metric: str, threshold: float) -> Comparison | None:
    """``encoding``'s OOD ``metric`` on ``task`` below ``threshold``: per run that counts, the
    threshold minus the score; None unless it learned ID on most runs."""
    if not _learned(_board(table, task, metric), encoding):
        return None
    runs = _counted_runs(table, task, [encoding])
    scores = run_scores(table, runs, metric)["OOD"]
    return Comparison(f"{encoding} < {threshold:g}", (task,), metric, (encoding,), tuple(threshold - scores), METRICS[metric].margin, f"{scores.mean():.3f}")


def learned_fails_past_training(table: Frames) -> Measured:
    """Learned positions' OOD exact match below :data:`NEAR_ZERO` on each synthetic task where
    they learned ID."""
    synthetic = suite_tasks("synthetic")
    made = [c for c in (_below(table, task, "learned", "exact_match", NEAR_ZERO) for task in synthetic) if c]
    missing = [task for task in synthetic if not _learned(_board(table, task, "exact_match"), "learned")]
    return Measured(tuple(made), "learned did not learn ID on most runs, or not run: " + ", ".join(missing) if missing else "")


def nope_best_on_sort(table: Frames) -> Measured:
    """NoPE ahead of each of the other four of Kazemnejad et al.'s encodings on sort's OOD exact
    match: their claim is over their five, on their metric."""
    return _pairs(table, [("sort", "nope", rival) for rival in KAZEMNEJAD_ORDER[1:]], "exact_match")


def _growth(table: Frames, encoding: str, above: bool, threshold: float) -> Comparison | None:
    """Perplexity at lm_long's longest bucket over that at the training context, per run of
    ``encoding``: above (or below) ``threshold``."""
    runs = _counted_runs(table, "lm_long", [encoding])
    if runs.empty:
        return None
    scores = run_scores(table, runs, runs["primary"].iloc[0])
    longest = [where for where in scores.columns if where not in ("ID", "OOD")][-1]
    ratios = scores[longest] / scores["ID"]
    return Comparison(
        f"{encoding} x{'>' if above else '<'}{threshold:g}",
        ("lm_long",),
        f"perplexity {longest} / ID",
        (encoding,),
        tuple((ratios - threshold) if above else (threshold - ratios)),
        RATIO_MARGIN,
        f"{scores['ID'].mean():.2f} -> {scores[longest].mean():.2f} (x{ratios.mean():.2f})",
    )


def press_sinusoidal_explodes_alibi_flat(table: Frames) -> Measured:
    """Sinusoidal's perplexity ratio (longest bucket over the training context) above
    :data:`PRESS_FACTOR`, ALiBi's below :data:`PRESS_FLAT`."""
    made = [c for c in (_growth(table, "sinusoidal", True, PRESS_FACTOR), _growth(table, "alibi", False, PRESS_FLAT)) if c]
    return Measured(tuple(made), "" if len(made) == 2 else "sinusoidal or ALiBi has no protocol 2 runs on lm_long")


def kazemnejad_scan(table: Frames) -> Measured:
    """The adjacent pairs of the paper's SCAN order (:data:`SCAN_PAIRS`) on exact match."""
    return _pairs(table, [("scan_length", a, b) for a, b in SCAN_PAIRS])


def relative_beats_absolute_on_long_sentences(table: Frames) -> Measured:
    """Shaw's relative encoding against sinusoidal in corpus BLEU on wmt_long's OOD split (no ID
    target there). The papers' own test is over sentences at one seed; pebench keeps no
    hypotheses in its records, so its test is over seeds."""
    return _pairs(table, [("wmt_long", "relative", "sinusoidal")])


def cope_beats_relative_past_the_context(table: Frames) -> Measured:
    """CoPE against relative positions (the paper's baseline; pebench's is Shaw et al.'s) on
    lm_long's OOD perplexity: past the training context."""
    return _pairs(table, [("lm_long", "cope", "relative")])


def dape_beats_its_base(table: Frames) -> Measured:
    """DAPE (KERPLE as its base) against KERPLE alone, on lm_long's OOD perplexity and each
    Chomsky task's OOD score."""
    return _pairs(table, [(task, "dape", "kerple") for task in ("lm_long", *suite_tasks("chomsky"))])


def fox_beats_rope_past_the_context(table: Frames) -> Measured:
    """FoX (NoPE with forget gates) against RoPE, the paper's Transformer, on lm_long's OOD
    perplexity."""
    return _pairs(table, [("lm_long", "fox", "rope")])


def _reaches(table: Frames) -> dict[str, pd.Series]:
    """ℓ*/L at exact match >= 0.95 on long_addition's diagonal (both operands n digits), by
    seed, of each encoding that learned ID on most of its runs there (the runs that count)."""
    board = _board(table, ARITHMETIC)
    if board is None:
        return {}
    learned = [encoding for encoding in board.index if _learned(board, encoding)]
    runs = _counted_runs(table, ARITHMETIC, learned)
    reach = reach_columns(table, runs)[reach_label("exact_match", 0.95, diagonal=True)] if len(runs) else pd.Series(dtype=float)
    return {encoding: pd.Series(reach[group.run].to_numpy(dtype=float), index=group.seed.to_numpy()) for encoding, group in runs.groupby("encoding")}


def reaches_where_classic_do_not(encoding: str) -> Callable[[Frames], Measured]:
    """The check of an arithmetic encoding's claim: its ℓ*/L reaches :data:`REACH_FACTOR` (per
    run, ℓ*/L minus the grid's step below it, so a run at 5L counts +0.5), and it reaches
    further than each of :data:`CLASSIC`, paired by seed."""

    def check(table: Frames) -> Measured:
        reaches = _reaches(table)
        own = reaches.get(encoding)
        if own is None:
            return Measured((), f"{encoding} did not learn ID on most runs of {ARITHMETIC}, or has no run there")
        metric = reach_label("exact_match", 0.95, diagonal=True)
        made = [
            Comparison(
                f"{encoding} reaches {REACH_FACTOR}L (ℓ*/L > {REACH_FACTOR - REACH_MARGIN:g}, the grid's last step)",
                (ARITHMETIC,),
                metric,
                (encoding,),
                tuple(own - (REACH_FACTOR - REACH_MARGIN)),
                REACH_MARGIN,
                f"{own.mean():.2f}",
            )
        ]
        missing = []
        for rival in CLASSIC:
            theirs = reaches.get(rival)
            if theirs is None:
                missing.append(rival)
                continue
            both = pd.concat([own, theirs], axis=1, keys=[encoding, rival]).dropna()
            means = f"{both[encoding].mean():.2f} vs {both[rival].mean():.2f}" if len(both) else "—"
            made.append(Comparison(f"{encoding} > {rival}", (ARITHMETIC,), metric, (encoding, rival), tuple(both[encoding] - both[rival]), REACH_MARGIN, means))
        return Measured(tuple(made), "not learned ID on most runs, or not run: " + ", ".join(missing) if missing else "")

    return check
