"""Per-example metrics of generated outputs and the checks on corpus text scores, on hand-made
outputs whose scores are counted by hand."""

import pytest

from pebench.core.metrics import exact_match, sequence_accuracy, text_scores

EOS = 3
a, b, c, d, e, f, g, h, x = range(10, 19)


@pytest.mark.parametrize("output, target, accuracy, exact", [
    ([a, b, c, EOS], [a, b, c, EOS], 1.0, 1.0),  # perfect
    ([a, c, d, e, f, g, h, EOS], [a, b, c, d, e, f, g, h, EOS], 1 / 9, 0.0),  # skips b: only a lines up (teacher forcing: 8/9)
    ([a, x, b, c, EOS], [a, b, c, EOS], 1 / 4, 0.0),  # inserts x: a lines up; c takes EOS's place
    ([a, b, EOS], [a, b, c, d, EOS], 2 / 5, 0.0),  # stops early: a, b; c, d and EOS missing
    ([a, b, c, c, c], [a, b, EOS], 2 / 3, 0.0),  # never ends (the cap): the extra c sits where EOS should
    ([], [a, EOS], 0.0, 0.0),  # nothing at all
])
def test_sequence_accuracy_and_exact_match_known_answers(output, target, accuracy, exact):
    assert sequence_accuracy(output, target) == pytest.approx(accuracy)
    assert exact_match(output, target) == exact


def test_an_empty_target_is_refused():
    with pytest.raises(ValueError, match="at least one token"):
        sequence_accuracy([a], [])


def test_text_scores_refuse_mismatched_or_mistyped_inputs():
    with pytest.raises(ValueError, match="one reference per hypothesis; got 3 hypotheses and 2 references"):
        text_scores(["a b", "c d", "e f"], ["a b", "c d"], ["bleu"])
    with pytest.raises(ValueError, match="references as a list of strings"):
        text_scores(["a b"], "a b", ["bleu"])
    with pytest.raises(ValueError, match="hypotheses as a list of strings"):
        text_scores([["a", "b"]], ["a b"], ["chrf"])


def test_bleu_is_undefined_without_a_reference_of_four_words_and_chrf_stays():
    references = ["Ja.", "Guten Morgen", "Das ist gut"]  # 13a tokens: 2, 2 and 3: no 4-gram anywhere
    scores, signatures = text_scores(references, references, ["bleu", "chrf"])
    assert scores == {"bleu": None, "chrf": 100.0} and "bleu" in signatures
    scores, _ = text_scores(["Das ist ein Test."], ["Das ist ein Test."], ["bleu"])  # 5 tokens with the full stop
    assert scores == {"bleu": 100.0}
