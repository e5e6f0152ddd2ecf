"""The validity section (``validity.md`` of ``pebench report``; docs/validity.md): the published
claims of :mod:`pebench.analysis.claims` judged on pebench's records, as Markdown.
"""

from __future__ import annotations

import math

from tabulate import tabulate

from pebench.analysis.claims import judged_claims, settled
from pebench.analysis.frames import Frames
from pebench.analysis.verdicts import PairTest, claim_verdict


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
