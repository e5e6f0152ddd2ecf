"""The validity section's verdicts on hand-made records whose answers are worked out by hand:
a comparison holds only when its 95% interval (paired by seed) lies on the claim's side."""

import json

import pytest

from pebench.results import tables
from pebench.validity import (every, judge, kazemnejad_order, learned_fails_past_training, most, nope_best_on_sort, paired_difference,
                              randomized_beats_base, relative_beats_absolute_on_long_sentences)

from .test_report import record


def test_a_comparison_holds_fails_or_is_unsure_by_its_interval():
    assert [judge(0.1, 0.3), judge(-0.3, 0.0), judge(0.0, 0.0), judge(-0.1, 0.2), judge(float("nan"), float("nan"))] == [
        "holds", "fails", "fails", "unsure", "unsure"]
    assert every(["holds", "holds"]) == "reproduced" and every(["holds", "unsure"]) == "inconclusive"
    assert every(["unsure", "fails"]) == "not reproduced"
    # most: 2 of 3 hold; 1 of 3 holds and 1 fails (the unsure one could make 2 of 3); 1 of 2 fails.
    assert most(["holds", "holds", "fails"]) == "reproduced" and most(["holds", "unsure", "fails"]) == "inconclusive"
    assert most(["holds", "fails"]) == "not reproduced"
    assert every([]) == most([]) == "not comparable"  # no comparison made


def test_the_difference_of_two_encodings_is_paired_by_seed():
    # Per-seed differences 0.1, 0.2, 0.0: mean 0.1, s = 0.1, t(0.975, 2) = 4.302653: half-width
    # 0.248414. Seed 3 of A has no partner in B and is left out.
    records = ([record("t", "A", seed, ood) for seed, ood in enumerate([0.9, 0.5, 0.4, 0.0])]
               + [record("t", "B", seed, ood) for seed, ood in enumerate([0.8, 0.3, 0.4])])
    mean, half, seeds = paired_difference(tables(records), "t", "A", "B")
    assert (mean, half, seeds) == pytest.approx((0.1, 0.248414, 3), abs=1e-6)


def test_lower_is_better_turns_the_difference_around():
    # Perplexity: A 5.0, 5.1 against B 7.0, 7.3 at seeds 0, 1: A is better by 2.0 and 2.2.
    def perplexity(encoding, seed, value):
        return json.loads(json.dumps(record("t", encoding, seed, value)).replace("sequence_accuracy", "perplexity"))

    records = [perplexity("A", 0, 5.0), perplexity("A", 1, 5.1), perplexity("B", 0, 7.0), perplexity("B", 1, 7.3)]
    mean, _, seeds = paired_difference(tables(records), "t", "A", "B")
    assert (mean, seeds) == pytest.approx((2.1, 2))


def pairs(task_values, seeds=(0, 1, 2)):
    """Records of randomized and rope: {task: ([randomized per seed], [rope per seed])}."""
    return [record(task, encoding, seed, values[seed]) for task, (randomized, rope) in task_values.items()
            for encoding, values in (("randomized", randomized), ("rope", rope)) for seed in seeds]


def test_randomized_beats_its_base_when_it_wins_beyond_the_interval_on_most_tasks():
    # Differences per seed: copy 0.30, 0.31, 0.29 (holds); reverse -0.2 each (fails); even_pairs
    # 0.2, 0.21, 0.19 (holds): 2 of 3. parity_check: rope does not learn ID, not compared.
    records = pairs({"copy": ([0.5, 0.51, 0.49], [0.2] * 3), "reverse": ([0.1] * 3, [0.3] * 3), "even_pairs": ([0.6, 0.61, 0.59], [0.4] * 3)})
    records += [record("parity_check", "randomized", 0, 0.9), record("parity_check", "rope", 0, 0.99, learned=False)]
    verdict = randomized_beats_base(tables(records))
    assert verdict.verdict == "reproduced"
    assert verdict.measured.startswith("better beyond the interval on 2 of 3: ")
    assert "reverse: randomized 0.100 vs rope 0.300 (-0.200 ± 0.000, 3 seeds)" in verdict.measured
    assert "not better beyond the interval on: reverse (randomized, fails)" in verdict.why


def test_randomized_against_its_base_shows_the_means_of_the_seeds_it_pairs():
    # rope ran seeds 0-2 (0.2, 0.3, 0.7; board mean 0.4), randomized seed 0 alone (0.5): paired
    # at seed 0, 0.5 vs 0.2, difference +0.3; the board's 0.4 would not differ from 0.5 by it.
    records = pairs({"copy": ([0.5], [0.2]), "reverse": ([0.1], [0.3]), "even_pairs": ([0.6], [0.4])}, seeds=(0,))
    records += [record("copy", "rope", 1, 0.3), record("copy", "rope", 2, 0.7)]
    assert "copy: randomized 0.500 vs rope 0.200 (+0.300, 1 seed)" in randomized_beats_base(tables(records)).measured


def test_randomized_at_one_seed_is_inconclusive_and_winning_half_is_not_most():
    one_seed = pairs({"copy": ([0.5], [0.2]), "reverse": ([0.1], [0.3]), "even_pairs": ([0.6], [0.4])}, seeds=(0,))
    assert randomized_beats_base(tables(one_seed)).verdict == "inconclusive"  # no interval at one seed
    half = pairs({"copy": ([0.5, 0.51, 0.49], [0.2] * 3), "reverse": ([0.1] * 3, [0.3] * 3)})
    assert randomized_beats_base(tables(half)).verdict == "not reproduced"
    alone = tables([record("copy", "randomized", 0, 0.5)])
    assert randomized_beats_base(alone).verdict == "not comparable"  # rope never ran


def test_relative_against_sinusoidal_past_the_training_lengths_of_wmt_long():
    def runs(relative, sinusoidal):
        return tables([record("wmt_long", encoding, seed, values[seed], target=None)
                       for encoding, values in (("relative", relative), ("sinusoidal", sinusoidal)) for seed in range(len(relative))])

    better = relative_beats_absolute_on_long_sentences(runs([0.3, 0.32, 0.31], [0.2, 0.21, 0.22]))
    assert better.verdict == "reproduced"  # differences 0.10, 0.11, 0.09
    assert better.measured == ("wmt_long BLEU past the training lengths: relative 0.31 vs sinusoidal 0.21 "
                               "(difference +0.100 ± 0.025, 3 seeds; within: 1.00 vs 1.00)")
    assert relative_beats_absolute_on_long_sentences(runs([0.2] * 3, [0.2] * 3)).verdict == "not reproduced"
    one_seed = relative_beats_absolute_on_long_sentences(runs([0.3], [0.2]))
    assert one_seed.verdict == "inconclusive" and "one seed" in one_seed.why
    alone = tables([record("wmt_long", "relative", 0, 0.3, target=None)])
    assert relative_beats_absolute_on_long_sentences(alone).verdict == "not comparable"


def test_learned_positions_about_zero_needs_the_interval_below_the_threshold():
    def learned(values):
        return learned_fails_past_training(tables([record("copy", "learned", seed, 0.5, ood_metric=v) for seed, v in enumerate(values)]))

    assert learned([0.0, 0.0, 0.0]).verdict == "reproduced"
    assert learned([0.0]).verdict == "inconclusive"  # one run: no interval
    assert learned([0.0, 0.04, 0.08]).verdict == "inconclusive"  # 0.04 ± 0.099
    assert learned([0.3, 0.31, 0.29]).verdict == "not reproduced"


def kazemnejad_records(exact_match, seeds=(0, 1, 2)):
    """The five encodings on the four synthetic tasks, with the same OOD exact match at every task and seed."""
    return tables([record(task, encoding, seed, 0.5, ood_metric=value) for task in ("copy", "reverse", "sort", "addition")
                   for encoding, value in exact_match.items() for seed in seeds])


def test_kazemnejads_order_is_judged_on_exact_match_over_the_four_synthetic_tasks():
    # The same order at every seed: the per-seed MRRs 1, 1/2, 1/3, 1/4, 1/5 at every seed, every
    # difference the same at each seed (half-width 0), above 0.
    published = kazemnejad_order(kazemnejad_records({"nope": 0.9, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}))
    assert published.verdict == "reproduced" and published.why == ""
    assert published.measured == ("nope 1.000 > t5 0.500 > alibi 0.333 > rope 0.250 > sinusoidal 0.200 "
                                  "(MRR of OOD exact match over addition, copy, reverse, sort at each seed, mean over 3 seeds)")
    one_seed = kazemnejad_order(kazemnejad_records({"nope": 0.9, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}, seeds=(0,)))
    assert one_seed.verdict == "inconclusive" and "(1 seed)" in one_seed.why


def test_kazemnejads_pairs_are_judged_on_the_per_seed_mrr_difference():
    # Seeds 0, 1: nope 0.9 > t5 0.8 > alibi 0.6 > rope 0.5 > sinusoidal 0.4 on every task (MRR
    # nope 1, t5 1/2, ...); seed 2: t5 0.85 > nope 0.7 (t5 1, nope 1/2). Means: nope 0.833 > t5
    # 0.817. nope - t5 per seed: 1/2, 1/2, -1/2 (mean 1/6 ± 1.434); every pair with nope or t5
    # varies by 1/2 between seeds (half-width 0.717 over means at most 0.633): unsure. alibi,
    # rope and sinusoidal keep their MRRs at every seed: those pairs hold.
    values = {"nope": [0.9, 0.9, 0.7], "t5": [0.8, 0.8, 0.85], "alibi": [0.6] * 3, "rope": [0.5] * 3, "sinusoidal": [0.4] * 3}
    verdict = kazemnejad_order(tables([record(task, encoding, seed, 0.5, ood_metric=per_seed[seed]) for task in ("copy", "reverse", "sort", "addition")
                                       for encoding, per_seed in values.items() for seed in range(3)]))
    assert verdict.verdict == "inconclusive"
    assert verdict.why == ("within the interval of the per-seed MRR difference (3 seeds): nope > t5, nope > alibi, nope > rope, "
                           "nope > sinusoidal, t5 > alibi, t5 > rope, t5 > sinusoidal")


def test_the_order_shown_is_the_order_judged_when_seed_averages_would_rank_otherwise():
    # On every task, nope 0.9 and t5 0.35 at seed 0, nope 0.4 and t5 0.5 at seeds 1 and 2:
    # averaged over seeds nope leads (0.567 against 0.45), but per seed t5 leads twice. Per-seed
    # MRR: nope 1, 1/2, 1/2 (mean 0.667), t5 1/2, 1, 1 (0.833); alibi, rope, sinusoidal 1/3, 1/4,
    # 1/5 at every seed. nope - t5: 1/2, -1/2, -1/2 (mean -1/6 ± 1.434): unsure, shown as "<";
    # nope - alibi 2/3, 1/6, 1/6 and t5 - alibi 1/6, 2/3, 2/3 (± 0.717): unsure; the rest hold.
    values = {"nope": [0.9, 0.4, 0.4], "t5": [0.35, 0.5, 0.5], "alibi": [0.3] * 3, "rope": [0.2] * 3, "sinusoidal": [0.05] * 3}
    verdict = kazemnejad_order(tables([record(task, encoding, seed, 0.5, ood_metric=per_seed[seed]) for task in ("copy", "reverse", "sort", "addition")
                                       for encoding, per_seed in values.items() for seed in range(3)]))
    assert verdict.measured.startswith("t5 0.833 > nope 0.667 > alibi 0.333 > rope 0.250 > sinusoidal 0.200")
    assert verdict.verdict == "inconclusive"
    assert verdict.why == ("within the interval of the per-seed MRR difference (3 seeds): nope < t5, nope > alibi, nope > rope, "
                           "nope > sinusoidal, t5 > alibi, t5 > rope, t5 > sinusoidal")


def test_kazemnejads_order_needs_a_seed_with_every_run():
    # copy at seed 0 only, the other three tasks at seed 1 only: no seed holds all four.
    records = [record(task, encoding, 0 if task == "copy" else 1, 0.5, ood_metric=value) for task in ("copy", "reverse", "sort", "addition")
               for encoding, value in {"nope": 0.9, "t5": 0.8, "alibi": 0.7, "rope": 0.6, "sinusoidal": 0.5}.items()]
    verdict = kazemnejad_order(tables(records))
    assert verdict.verdict == "not comparable" and verdict.why.startswith("no seed at which")


def test_nope_first_on_sort_is_judged_against_each_ranked_rival():
    # Seeds 0-2. alibi above nope at every seed by 0.1 (fails); t5 0.5, 0.9, 0.1 against nope's
    # 0.6, 0.6, 0.6 (difference 0.1, -0.3, 0.5: unsure); rope below nope by 0.3 at every seed (holds).
    values = {"nope": [0.6] * 3, "alibi": [0.7] * 3, "t5": [0.5, 0.9, 0.1], "rope": [0.3] * 3}
    verdict = nope_best_on_sort(tables([record("sort", encoding, seed, scores[seed]) for encoding, scores in values.items() for seed in range(3)]))
    assert verdict.verdict == "not reproduced"
    assert verdict.why == "as good as NoPE or better beyond the interval: alibi; not separated from NoPE by the interval: t5"
    assert verdict.measured.startswith("sort OOD: nope 0.600 (rank 2); best other alibi 0.700; at the seeds both learned: "
                                      "nope 0.600 vs alibi 0.700 (-0.100 ± 0.000, 3 seeds)")


def test_a_tie_where_the_paper_has_an_order_does_not_reproduce_it():
    # nope and t5 tie on every task and seed: rank 1.5 each, MRR 2/3, difference 0 in every resample.
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
