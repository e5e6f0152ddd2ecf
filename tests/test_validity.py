"""The validity section's verdicts on hand-made records whose answers are worked out by hand."""

from pebench.results import tables
from pebench.validity import kazemnejad_order, randomized_beats_base, relative_beats_absolute_on_long_sentences

from .test_report import record


def test_randomized_beats_its_base_when_it_wins_on_most_tasks_where_both_learned():
    # randomized vs rope, OOD: copy 0.5 > 0.2, reverse 0.1 < 0.3, even_pairs 0.6 > 0.4: 2 of 3.
    # parity_check: rope does not learn ID, so that pair is not compared.
    records = [record(task, encoding, 0, ood) for task, encoding, ood in [
        ("copy", "randomized", 0.5), ("copy", "rope", 0.2), ("reverse", "randomized", 0.1), ("reverse", "rope", 0.3),
        ("even_pairs", "randomized", 0.6), ("even_pairs", "rope", 0.4), ("parity_check", "randomized", 0.9)]]
    records.append(record("parity_check", "rope", 0, 0.99, learned=False))
    verdict = randomized_beats_base(tables(records))
    assert verdict.verdict == "reproduced"
    assert verdict.measured.startswith("better on 2 of 3: ")
    assert "reverse: randomized 0.100 vs rope 0.300" in verdict.measured and "parity_check" not in verdict.measured
    assert "not the better on: reverse (randomized)" in verdict.why


def test_randomized_winning_half_the_tasks_is_not_most():
    records = [record(task, encoding, 0, ood) for task, encoding, ood in [
        ("copy", "randomized", 0.5), ("copy", "rope", 0.2), ("reverse", "randomized", 0.1), ("reverse", "rope", 0.3)]]
    assert randomized_beats_base(tables(records)).verdict == "not reproduced"
    assert randomized_beats_base(tables(records[:1])).verdict == "not comparable"  # rope never ran


def test_relative_against_sinusoidal_past_the_training_lengths_of_wmt_long():
    def runs(relative, sinusoidal):
        return tables([record("wmt_long", "relative", 0, relative, target=None), record("wmt_long", "sinusoidal", 0, sinusoidal, target=None)])

    better = relative_beats_absolute_on_long_sentences(runs(0.3, 0.2))
    assert better.verdict == "reproduced"
    assert better.measured == "wmt_long BLEU past the training lengths: relative 0.30 vs sinusoidal 0.20 (within: 1.00 vs 1.00; 1 seed)"
    assert relative_beats_absolute_on_long_sentences(runs(0.2, 0.2)).verdict == "not reproduced"
    alone = tables([record("wmt_long", "relative", 0, 0.3, target=None)])
    assert relative_beats_absolute_on_long_sentences(alone).verdict == "not comparable"


def kazemnejad_records(exact_match):
    """The five encodings on the four synthetic tasks, seed 0, with the same OOD exact match on each."""
    return tables([record(task, encoding, 0, 0.5, ood_metric=value) for task in ("copy", "reverse", "sort", "addition")
                   for encoding, value in exact_match.items()])


def test_kazemnejads_order_is_judged_on_exact_match_over_the_four_synthetic_tasks():
    published = kazemnejad_order(kazemnejad_records({"nope": 0.9, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}))
    assert published.verdict == "reproduced"
    assert published.measured == ("nope 1.000 > t5 0.500 > alibi 0.333 > rope 0.250 > sinusoidal 0.200 "
                                  "(MRR of OOD exact match over addition, copy, reverse, sort, 4 runs each)")


def test_a_tie_where_the_paper_has_an_order_does_not_reproduce_it():
    # nope and t5 tie on every task: rank 1.5 each, MRR 2/3.
    tied = kazemnejad_order(kazemnejad_records({"nope": 0.8, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}))
    assert tied.verdict == "not reproduced" and tied.why == "the order differs: nope = t5 here"
    assert tied.measured.startswith("nope 0.667 = t5 0.667 > alibi 0.333")
    swapped = kazemnejad_order(kazemnejad_records({"nope": 0.5, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.9}))
    assert swapped.why == ("the order differs: nope < t5, nope < alibi, nope < rope, nope < sinusoidal, t5 < sinusoidal, "
                           "alibi < sinusoidal, rope < sinusoidal here")


def test_kazemnejads_order_is_not_comparable_without_every_synthetic_task():
    # Only copy: the five agree on one task, which is not the published comparison.
    records = [record("copy", encoding, 0, 0.5, ood_metric=value)
               for encoding, value in {"nope": 0.9, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}.items()]
    assert kazemnejad_order(tables(records)).verdict == "not comparable"
