"""The validity section: published claims about length generalization, each stated as a list of
directed pairs, judged on pebench's records.

A pair says "a is better than b" on a task and metric (or "a's score is on the claimed side of a
threshold"). It is judged on its per-seed differences (a's OOD score minus b's at the same seed,
turned around where lower is better; for a threshold, the claimed side's distance from it) by
:mod:`pebench.analysis.verdicts`: *holds*, *reversed*, *equivalent* (within ±δ, two one-sided tests) or
*unresolved*, Holm-corrected over the pairs of one claim; the claim is *reproduced* (every pair
holds), *contradicted* (one is reversed) or *partly*, with the counts. A claim is *settled* when
it is reproduced, contradicted (one reversed pair refutes it, whatever its other pairs show), or
partly with every pair that does not hold shown equivalent.

δ, the equivalence margin: the metric's (:data:`pebench.core.metrics.METRICS`: 0.02 for accuracies,
0.5 BLEU points), :data:`MRR_MARGIN` for a difference of MRRs, :data:`RATIO_MARGIN` for a
perplexity ratio.

An ordering of k encodings is its k - 1 adjacent pairs: the claim is exactly those (the others
follow from them), and every further pair would spend Holm's α on a consequence. Pairs are made
only where both encodings learned ID on most runs of the task, at the seeds where both learned it
(a model that has not learned the training lengths is never compared); the pairs a claim could
not make are named. Every figure comes from the protocol 2 records of the cards' own settings,
through the leaderboards' own per-run scores (:func:`pebench.analysis.leaderboards.run_scores`), so the
section changes only when the records do.

:func:`seed_plan` sizes a grid for the claims: per pair, the seeds at which the paired t test has
80% power at the observed difference (:func:`pebench.analysis.verdicts.seeds_for_power`); per task, the
largest of those counts that does not exceed :data:`pebench.analysis.verdicts.MAX_PLANNED_SEEDS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tabulate import tabulate

from pebench.analysis.frames import Frames
from pebench.analysis.leaderboards import counts_ood, leaderboard, overall, ranked_runs, reach_columns, reach_label, run_scores, run_times
from pebench.analysis.verdicts import MAX_PLANNED_SEEDS, PairTest, claim_verdict, judge_pairs, pair_test, seeds_for_power
from pebench.config.cards import suite_tasks
from pebench.core.metrics import METRICS, higher_is_better

SYNTHETIC = suite_tasks("synthetic")
KAZEMNEJAD_ORDER = ("nope", "t5", "alibi", "rope", "sinusoidal")
KAZEMNEJAD_MRR = {"nope": 0.687, "t5": 0.549, "alibi": 0.502, "rope": 0.330, "sinusoidal": 0.215}
KAZEMNEJAD_SCAN = {"nope": 0.80, "t5": 0.80, "alibi": 0.44, "rope": 0.28, "sinusoidal": 0.06}
SCAN_PAIRS = (("nope", "alibi"), ("t5", "alibi"), ("alibi", "rope"), ("rope", "sinusoidal"))  # the order's adjacent pairs; NoPE ~ T5 claims no order
RANDOMIZED_PAIRS = {"randomized": "rope", "randomized_sinusoidal": "sinusoidal"}
RUOSS_TASKS = ("copy", "reverse") + suite_tasks("chomsky")  # theirs: the Chomsky suite
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
        tasks: the tasks it is measured on (the four synthetic tasks for an MRR).
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


@dataclass(frozen=True)
class Claim:
    claim: str
    source: str
    published: str
    pairs: str  # which pairs stand for the claim, and why
    check: Callable[[Frames], Measured]


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


def mrr_order(tasks: tuple[str, ...], which: str) -> Callable[[Frames], Measured]:
    """The check of Kazemnejad et al.'s order on ``tasks`` (``which`` names them in what it
    says): the order's adjacent pairs on the per-seed MRR of OOD exact match
    (:func:`_mrr_per_seed`). MRR is the paper's statistic, and one MRR per seed pairs the
    encodings by seed."""

    def check(table: Frames) -> Measured:
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


kazemnejad_order = mrr_order(SYNTHETIC, "the decoder-only synthetic suite")
kazemnejad_order_on_their_suite = mrr_order(suite_tasks("kazemnejad"), "the kazemnejad suite")


def randomized_beats_base(table: Frames) -> Measured:
    """Each randomized card against its base on each of Ruoss et al.'s tasks (theirs, and copy and reverse)."""
    return _pairs(table, [(task, randomized, base) for task in RUOSS_TASKS for randomized, base in RANDOMIZED_PAIRS.items()])


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
    made = [c for c in (_below(table, task, "learned", "exact_match", NEAR_ZERO) for task in SYNTHETIC) if c]
    missing = [task for task in SYNTHETIC if not _learned(_board(table, task, "exact_match"), "learned")]
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


CLAIMS = (
    Claim(
        "NoPE > T5 > ALiBi > RoPE > sinusoidal (decoder-only, mean reciprocal rank over tasks)",
        "Kazemnejad et al. 2023, arXiv:2305.19466 (NeurIPS)",
        ", ".join(f"{e} {m}" for e, m in KAZEMNEJAD_MRR.items()) + " (their tasks, train <= 20, test 21-40, exact match)",
        "the 4 adjacent pairs of the order, on the per-seed MRR of OOD exact match over the 4 synthetic tasks",
        kazemnejad_order,
    ),
    Claim(
        "randomized positions beat their base encoding out of distribution",
        "Ruoss et al. 2023, arXiv:2305.16843",
        "randomized > base on most tasks (encoder, per-sequence accuracy)",
        "randomized > rope and randomized_sinusoidal > sinusoidal on copy, reverse and each Chomsky task, where both learned ID",
        randomized_beats_base,
    ),
    Claim(
        "learned absolute positions score about 0 past the training lengths",
        "Ruoss et al. 2023; Kazemnejad et al. 2023",
        "about 0 beyond the trained positions",
        f"learned's OOD exact match < {NEAR_ZERO} on each synthetic task where it learned ID",
        learned_fails_past_training,
    ),
    Claim(
        "NoPE extrapolates best on sort-like tasks",
        "Kazemnejad et al. 2023",
        "NoPE first on sorting, of their five",
        "nope > each of t5, alibi, rope, sinusoidal on sort's OOD exact match (the paper's five)",
        nope_best_on_sort,
    ),
    Claim(
        "sinusoidal perplexity explodes past the training length, ALiBi's stays flat",
        "Press et al. 2022, arXiv:2108.12409, fig. 1",
        "sinusoidal rises steeply past L, ALiBi flat to 16x (WikiText-103)",
        f"perplexity at lm_long's longest bucket over the training context's: sinusoidal > x{PRESS_FACTOR:g}, ALiBi < x{PRESS_FLAT:g}",
        press_sinusoidal_explodes_alibi_flat,
    ),
    Claim(
        "on SCAN's length split: NoPE ~ T5 > ALiBi > RoPE > sinusoidal",
        "Kazemnejad et al. 2023, arXiv:2305.19466",
        ", ".join(f"{e} {v}" for e, v in KAZEMNEJAD_SCAN.items()) + " (exact match)",
        "the 4 adjacent pairs of the order (nope > alibi, t5 > alibi, alibi > rope, rope > sinusoidal) on OOD exact match",
        kazemnejad_scan,
    ),
    Claim(
        "relative positions translate sentences longer than any in training better than absolute ones",
        "Rosendahl et al. 2019 (IWSLT); Neishi and Yoshinaga 2019 (CoNLL)",
        "relative ahead by 4.4-11.9% BLEU on sentences longer than the training ones, equal overall (WMT, Transformer)",
        "relative > sinusoidal on wmt_long's OOD BLEU",
        relative_beats_absolute_on_long_sentences,
    ),
    Claim(
        "contextual positions (CoPE) model text past the training context better than relative positions",
        "Golovneva et al. 2024, arXiv:2405.18719",
        "CoPE lower perplexity than relative PE on Wikitext-103 and code; generalises to longer test contexts on counting and selective copy",
        "cope > relative on lm_long's OOD perplexity (pebench's relative is Shaw et al.'s)",
        cope_beats_relative_past_the_context,
    ),
    Claim(
        "DAPE extrapolates better than its static base",
        "Zheng et al. 2024, arXiv:2405.14722 (NeurIPS)",
        "DAPE-Kerple below Kerple in perplexity at 8-64x the training length (Arxiv, Books3); ahead on the Chomsky tasks",
        "dape > kerple on lm_long's OOD perplexity and on each Chomsky task's OOD sequence accuracy, where both learned ID",
        dape_beats_its_base,
    ),
    Claim(
        "the Forgetting Transformer extrapolates past its training context better than the Transformer",
        "Lin et al. 2025, arXiv:2503.02130 (ICLR)",
        "FoX outperforms the Transformer (RoPE) at length extrapolation (per-token loss past the training context, LongCrawl64)",
        "fox > rope on lm_long's OOD perplexity",
        fox_beats_rope_past_the_context,
    ),
    Claim(
        "Abacus embeddings extrapolate addition to at least 5x the training length at >= 95% exact match, where the classic encodings do not",
        "McLeish et al. 2024, arXiv:2405.17399 (NeurIPS), fig. 1",
        "trained on operands of up to 20 digits: 99% exact match at 100 digits (5x; 16-layer decoder, a GPU-day); FIRE and NoPE far lower",
        f"on {ARITHMETIC}'s diagonal (L = 10): abacus's ℓ*/L at exact match >= 0.95 reaches 5, and exceeds each of {', '.join(CLASSIC)}'s",
        reaches_where_classic_do_not("abacus"),
    ),
    Claim(
        "position coupling extrapolates addition to at least 5x the training length at >= 95% exact match, where the classic encodings do not",
        "Cho et al. 2024, arXiv:2405.20671 (NeurIPS), fig. 1",
        "trained on operands of 1-30 digits: above 95% exact match up to 200 digits (6.7x; 1-layer decoder); NoPE and random-start APE fail past 30",
        f"on {ARITHMETIC}'s diagonal (L = 10; McLeish et al.'s unpadded reversed format, not Cho et al.'s padded one): "
        f"position_coupling's ℓ*/L at exact match >= 0.95 reaches 5, and exceeds each of {', '.join(CLASSIC)}'s",
        reaches_where_classic_do_not("position_coupling"),
    ),
    Claim(
        "NoPE > T5 > ALiBi > RoPE > sinusoidal on the paper's own tasks, in its formats (decoder-only, mean reciprocal rank)",
        "Kazemnejad et al. 2023, arXiv:2305.19466 (NeurIPS), fig. 3",
        ", ".join(f"{e} {m}" for e, m in KAZEMNEJAD_MRR.items()) + " (their ten task families, exact match)",
        "the 4 adjacent pairs of the order, on the per-seed MRR of OOD exact match over the kazemnejad suite (their 10 families)",
        kazemnejad_order_on_their_suite,
    ),
)


def settled(outcomes: list[str]) -> bool:
    """A claim is settled when it has pairs and either one of them is reversed (the claim is
    contradicted, Holm-corrected) or none is unresolved."""
    return bool(outcomes) and ("reversed" in outcomes or "unresolved" not in outcomes)


def judged_claims(table: Frames) -> list[tuple[Claim, Measured, list[str]]]:
    """Each claim of :data:`CLAIMS`, what it measured, and each comparison's outcome."""
    judged = []
    for claim in CLAIMS:
        measured = claim.check(table)
        judged.append((claim, measured, judge_pairs([c.test() for c in measured.comparisons])))
    return judged


def _interval(test: PairTest, confidence: float) -> str:
    low, high = test.interval(confidence)
    return "—" if math.isnan(low) else f"[{low:+.3f}, {high:+.3f}]"


def validity_section(table: Frames) -> str:
    """The Markdown of the claims (claim, source, published, pairs, verdict, pairs not made), how
    many are settled, and one row per pair: its means, mean difference, 95% and 90% intervals,
    δ, seeds and outcome."""
    judged = judged_claims(table)
    claims, pairs = [], []
    for number, (claim, measured, outcomes) in enumerate(judged, 1):
        claims.append([number, claim.claim, claim.source, claim.published, claim.pairs, claim_verdict(outcomes), measured.not_compared or "—"])
        for comparison, outcome in zip(measured.comparisons, outcomes, strict=True):
            test = comparison.test()
            pairs.append(
                [
                    number,
                    comparison.pair,
                    ", ".join(comparison.tasks),
                    comparison.metric,
                    comparison.means,
                    f"{test.mean:+.3f}",
                    _interval(test, 0.95),
                    _interval(test, 0.90),
                    f"{comparison.margin:g}",
                    test.n,
                    outcome,
                ]
            )
    count = sum(settled(outcomes) for _, _, outcomes in judged)
    return (
        "Published claims against pebench's protocol 2 records, each as directed pairs judged on their per-seed OOD differences "
        "(paired t test for holds / reversed, two one-sided tests within ±δ for equivalent, Holm's correction over a claim's pairs; "
        "docs/validity.md)\n\n"
        + tabulate(claims, ["", "claim", "source", "published", "pairs", "verdict", "pairs not made"], tablefmt="github")
        + f"\n\nSettled (contradicted by a reversed pair, or no pair unresolved): {count} of {len(judged)} claims.\n\n"
        + tabulate(
            pairs,
            ["claim", "pair", "task", "metric", "means", "difference", "95% interval", "90% interval", "δ", "seeds", "outcome"],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n"
    )


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
