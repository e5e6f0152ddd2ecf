"""The published claims about length generalization that pebench tests, as data: each names its
source, what the source published, which of pebench's pairs stand for it, and the check that
measures them (:mod:`pebench.analysis.checks`); a new claim is a new row of :data:`CLAIMS`.

:func:`judged_claims` judges each claim's pairs (:mod:`pebench.analysis.verdicts`): *holds*,
*reversed*, *equivalent* (within ±δ, two one-sided tests) or *unresolved*, Holm-corrected over
the pairs of one claim; the claim is *reproduced* (every pair holds), *contradicted* (one is
reversed) or *partly*, with the counts. A claim is *settled* when it is reproduced, contradicted
(one reversed pair refutes it, whatever its other pairs show), or partly with every pair that
does not hold shown equivalent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pebench.analysis.checks import (
    ARITHMETIC,
    CLASSIC,
    NEAR_ZERO,
    PRESS_FACTOR,
    PRESS_FLAT,
    Measured,
    cope_beats_relative_past_the_context,
    dape_beats_its_base,
    fox_beats_rope_past_the_context,
    kazemnejad_order,
    kazemnejad_order_on_their_suite,
    kazemnejad_scan,
    learned_fails_past_training,
    nope_best_on_sort,
    press_sinusoidal_explodes_alibi_flat,
    randomized_beats_base,
    reaches_where_classic_do_not,
    relative_beats_absolute_on_long_sentences,
)
from pebench.analysis.frames import Frames
from pebench.analysis.verdicts import judge_pairs

KAZEMNEJAD_MRR = {"nope": 0.687, "t5": 0.549, "alibi": 0.502, "rope": 0.330, "sinusoidal": 0.215}  # as published: MRR over their tasks
KAZEMNEJAD_SCAN = {"nope": 0.80, "t5": 0.80, "alibi": 0.44, "rope": 0.28, "sinusoidal": 0.06}  # as published: SCAN's OOD exact match


@dataclass(frozen=True)
class Claim:
    """One published claim.

    Args:
        claim: what the source claims, in a sentence.
        source: the paper (authors, year, arXiv id, venue, figure).
        published: what the source reports, its numbers and setting.
        pairs: which pairs stand for the claim on pebench's records, and why.
        check: what measures those pairs on the records (:mod:`pebench.analysis.checks`).
    """

    claim: str
    source: str
    published: str
    pairs: str
    check: Callable[[Frames], Measured]


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
