"""Kazemnejad et al.'s suite: the PCFG SET interpreter against hand-worked values and against
every pair PCFG SET publishes (dev, test, productivity test)."""

import os
from pathlib import Path

import pytest

from pebench.tasks.kazemnejad import interpret

PCFGSET = Path(os.environ.get("PEBENCH_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) / "pcfgset"


def test_each_function_by_hand():
    x, y = ("A", "B", "C"), ("D", "E")
    assert interpret("copy A B C".split()) == x and interpret("reverse A B C".split()) == ("C", "B", "A")
    assert interpret("shift A B C".split()) == ("B", "C", "A") and interpret("echo A B C".split()) == ("A", "B", "C", "C")
    assert interpret("swap_first_last A B C".split()) == ("C", "B", "A") and interpret("swap_first_last A".split()) == ("A",)
    assert interpret("repeat D E".split()) == y + y
    assert interpret("append A B C , D E".split()) == x + y and interpret("prepend A B C , D E".split()) == y + x
    assert interpret("remove_first A B C , D E".split()) == y and interpret("remove_second A B C , D E".split()) == x
    # Nested, in prefix order: shift(reverse(copy(M2 H16 K3 Z20))) = shift(Z20 K3 H16 M2) = K3 H16 M2 Z20,
    # then swap_first_last: Z20 H16 M2 K3 (PCFG SET's dev.src, line 1).
    assert interpret("swap_first_last shift reverse copy M2 H16 K3 Z20".split()) == ("Z20", "H16", "M2", "K3")
    # A binary function's first argument may itself be binary: append(append(A, B), C).
    assert interpret("append append A , B , C".split()) == ("A", "B", "C")


def test_a_malformed_source_is_refused_with_where():
    with pytest.raises(ValueError, match="the binary function 'append' at 0 has no ','"):
        interpret("append A B".split())
    with pytest.raises(ValueError, match="an empty string argument at 1"):
        interpret("reverse , A".split())
    with pytest.raises(ValueError, match="ends where an argument was expected"):
        interpret("reverse".split())


@pytest.mark.skipif(not PCFGSET.is_dir(), reason=f"PCFG SET is not at {PCFGSET} ($PEBENCH_DATA/pcfgset, else ../shared/data/pcfgset)")
@pytest.mark.parametrize("split", ["pcfgset/dev", "pcfgset/test", "productivity/test"])
def test_the_interpreter_reproduces_every_published_pair(split):
    sources = (PCFGSET / f"{split}.src").read_text().splitlines()
    targets = (PCFGSET / f"{split}.tgt").read_text().splitlines()
    assert len(sources) == len(targets) > 4000
    wrong = [(s, t) for s, t in zip(sources, targets) if " ".join(interpret(s.split())) != t]
    assert not wrong, f"{len(wrong)} of {len(sources)} differ, e.g. {wrong[0]}"
