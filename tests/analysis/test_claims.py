"""The claims table: when a claim's outcomes settle it, and no card read at import."""

import subprocess
import sys
from pathlib import Path

from pebench.analysis.claims import settled


def test_one_reversed_pair_settles_a_claim_an_unresolved_one_does_not():
    # One reversed pair refutes the claim whatever the others show: settled beside an unresolved pair, not without it.
    assert settled(["holds", "reversed", "unresolved"]) and not settled(["holds", "unresolved"]) and not settled([])


def test_the_claims_and_their_checks_read_no_card_at_import():
    # The suites' tasks are read when a check runs: importing the claims, the checks, the
    # section and the plan with the suite cards made unreadable succeeds.
    script = """
import pebench.config.cards as cards
def unreadable(*args, **kwargs): raise AssertionError("a card was read at import")
cards.suite_cards = cards._card_files = unreadable
import pebench.analysis.claims, pebench.analysis.checks, pebench.analysis.validity, pebench.analysis.seed_plan
"""
    subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], check=True)
