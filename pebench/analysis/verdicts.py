"""Pairwise verdicts: does encoding a extrapolate better than b, worse, or the same within δ?

A claim is a list of directed pairs (a better than b on a task and metric). Each pair is judged
on its paired per-seed differences d_1..d_n (a's score minus b's at the same seed, turned
around for a metric where lower is better), with n - 1 degrees of freedom:

- *holds*: the difference is significant and positive: the two-sided paired t test
  (Student 1908; t = mean / (s / sqrt(n))) rejects "no difference";
- *reversed*: significant and negative;
- *equivalent*: not significantly different, and within ±δ: the two one-sided tests (Schuirmann
  1987, TOST) reject both "d <= -δ" and "d >= δ", which at level α is the whole 100(1 - 2α)%
  interval (90% at α = 0.05) lying inside (-δ, δ);
- *unresolved*: neither (and any pair measured at fewer than two seeds).

Over the k pairs of one claim, each family of tests (the difference tests, the equivalence
tests) is corrected by Holm's step-down procedure (Holm 1979): the j-th smallest of the k
p-values is compared with α / (k - j + 1), and a test is rejected only when every smaller one
was. A claim is *reproduced* when every pair holds, *contradicted* when one is reversed, and
*partly* otherwise, with the counts.

Seeds planned by power: the smallest n >= 2 at which the paired t test detects the observed
mean difference with probability 1 - β (80%) at α, from the noncentral t distribution with
noncentrality (mean / s) sqrt(n) (exact, not the normal approximation, which asks one seed fewer
at small n).
Shapes: arrays of per-seed differences, one per pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.80
MAX_PLANNED_SEEDS = 10
OUTCOMES = ("holds", "reversed", "equivalent", "unresolved")


@dataclass(frozen=True)
class PairTest:
    """One pair's statistics before correction.

    Args:
        n: seeds paired.
        mean: mean difference (a better than b when positive).
        sd: sample standard deviation of the differences (NaN below two seeds).
        p_difference: two-sided p-value of "no difference" (NaN below two seeds).
        p_equivalence: TOST p-value, the larger of the two one-sided ones (NaN below two seeds).
    """

    n: int
    mean: float
    sd: float
    p_difference: float
    p_equivalence: float

    def interval(self, confidence: float) -> tuple[float, float]:
        """The ``confidence`` Student-t interval of the mean difference ((NaN, NaN) below two seeds)."""
        if self.n < 2:
            return math.nan, math.nan
        half = float(stats.t.ppf((1 + confidence) / 2, self.n - 1)) * self.sd / math.sqrt(self.n)
        return self.mean - half, self.mean + half


def pair_test(differences: Sequence[float], margin: float) -> PairTest:
    """The paired t test and TOST of ``differences`` (per seed) at equivalence ``margin`` δ.

    Raises:
        ValueError: for a difference that is not finite, or a margin that is not positive.
    """
    d = np.asarray(differences, dtype=float)
    if not np.isfinite(d).all():
        raise ValueError(f"a paired difference is not finite: {d.tolist()}")
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be positive; got {margin}")
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return PairTest(n, mean, math.nan, math.nan, math.nan)
    if (d == d[0]).all():  # every seed the same difference: certain, as far as these seeds tell
        return PairTest(n, mean, 0.0, 0.0 if mean != 0 else 1.0, 0.0 if abs(mean) < margin else 1.0)
    sd = float(d.std(ddof=1))
    se, df = sd / math.sqrt(n), n - 1
    p_difference = float(2 * stats.t.sf(abs(mean) / se, df))
    p_equivalence = max(float(stats.t.sf((mean + margin) / se, df)), float(stats.t.cdf((mean - margin) / se, df)))
    return PairTest(n, mean, sd, p_difference, p_equivalence)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rejections of ``p_values`` (NaN never rejected), in their order."""
    order = sorted(range(len(p_values)), key=lambda i: (math.isnan(p_values[i]), p_values[i]))
    rejected, k = [False] * len(p_values), len(p_values)
    for rank, i in enumerate(order):
        if math.isnan(p_values[i]) or p_values[i] > alpha / (k - rank):
            break
        rejected[i] = True
    return rejected


def judge_pairs(tests: Sequence[PairTest], alpha: float = ALPHA) -> list[str]:
    """Each pair's outcome (:data:`OUTCOMES`) over one claim's pairs, Holm-corrected."""
    different = holm([t.p_difference for t in tests], alpha)
    same = holm([t.p_equivalence for t in tests], alpha)
    return ["holds" if d and t.mean > 0 else "reversed" if d else "equivalent" if s else "unresolved" for t, d, s in zip(tests, different, same, strict=True)]


def claim_verdict(outcomes: Sequence[str]) -> str:
    """ "reproduced" (every pair holds), "contradicted" (one is reversed) or "partly", with the
    counts, e.g. "partly (3 hold, 1 equivalent, 0 reversed, 1 unresolved)"; "not comparable"
    without pairs."""
    if not outcomes:
        return "not comparable"
    counts = {outcome: list(outcomes).count(outcome) for outcome in OUTCOMES}
    shown = f"{counts['holds']} hold, {counts['equivalent']} equivalent, {counts['reversed']} reversed, {counts['unresolved']} unresolved"
    verdict = "reproduced" if counts["holds"] == len(outcomes) else "contradicted" if counts["reversed"] else "partly"
    return f"{verdict} ({shown})"


def power(n: int, effect: float, alpha: float = ALPHA) -> float:
    """The probability that the two-sided paired t test at ``alpha`` rejects at n seeds when the
    true mean difference is ``effect`` standard deviations."""
    df, noncentrality = n - 1, abs(effect) * math.sqrt(n)
    critical = float(stats.t.ppf(1 - alpha / 2, df))
    lower = float(stats.nct.cdf(-critical, df, noncentrality))
    return float(stats.nct.sf(critical, df, noncentrality)) + (0.0 if math.isnan(lower) else lower)


def seeds_for_power(mean: float, sd: float, target: float = POWER, alpha: float = ALPHA, at_most: int = 1000) -> int | None:
    """The smallest n >= 2 with :func:`power` >= ``target`` at the observed ``mean`` and ``sd``
    of the differences; None when none up to ``at_most`` (or no difference observed)."""
    if not (math.isfinite(mean) and math.isfinite(sd)) or mean == 0:
        return None
    if sd == 0:
        return 2
    return next((n for n in range(2, at_most + 1) if power(n, mean / sd, alpha) >= target), None)
