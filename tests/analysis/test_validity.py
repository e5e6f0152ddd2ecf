"""The validity section on hand-made records whose answers are worked out by hand: every claim's
verdict, every pair's row and the count of settled claims."""

import re

from pebench.analysis.validity import validity_section
from tests.hand_records import kazemnejad_records


def test_the_section_shows_every_pair_and_counts_the_settled_claims():
    table = kazemnejad_records({"nope": [0.9] * 3, "t5": [0.8] * 3, "alibi": [0.7] * 3, "rope": [0.6] * 3, "sinusoidal": [0.5] * 3})
    section = validity_section(table)
    assert "| reproduced (4 hold, 0 equivalent, 0 reversed, 0 unresolved) |" in section
    # Settled: claim 1 (4 hold) and claim 4 (nope on sort: 4 hold at every seed, a constant gap).
    assert "Settled (contradicted by a reversed pair, or no pair unresolved): 2 of 13 claims." in section
    assert section.count("| nope > t5 ") == 2  # claim 1 on the MRR, claim 4 on sort
    assert re.search(r"\| nope > t5 +\| copy, reverse, sort, addition \| MRR of exact_match +\| 1\.000 vs 0\.500 \| \+0\.500 +\| \[\+0\.500, \+0\.500\]", section)
