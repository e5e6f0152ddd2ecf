"""Pairwise verdicts against hand-computed answers. The t distribution with 2 degrees of freedom
has the closed form F(t) = 1/2 + t / (2 sqrt(t^2 + 2)), which the known answers below use."""

import math

import pytest

from pebench.analysis.verdicts import PairTest, claim_verdict, holm, judge_pairs, pair_test, power, seeds_for_power


def f2(t: float) -> float:
    """Student's t CDF at 2 degrees of freedom, by its closed form."""
    return 0.5 + t / (2 * math.sqrt(t * t + 2))


def test_a_difference_within_noise_is_unresolved():
    # d = 0.1, 0.2, 0.3: mean 0.2, s 0.1, se 0.1 / sqrt(3), t = 2 sqrt(3) = 3.4641
    test = pair_test([0.1, 0.2, 0.3], margin=0.02)
    assert test.n == 3 and test.mean == pytest.approx(0.2) and test.sd == pytest.approx(0.1)
    assert test.p_difference == pytest.approx(2 * (1 - f2(2 * math.sqrt(3))), abs=1e-9)  # 0.0742
    se = 0.1 / math.sqrt(3)
    assert test.p_equivalence == pytest.approx(max(1 - f2(0.22 / se), f2(0.18 / se)), abs=1e-9)  # 0.955
    low, high = test.interval(0.95)  # t_0.975(2) = 4.3027: 0.2 -+ 0.2484
    assert (low, high) == (pytest.approx(0.2 - 4.302653 * se, abs=1e-6), pytest.approx(0.2 + 4.302653 * se, abs=1e-6))
    assert judge_pairs([test]) == ["unresolved"]


def test_a_clear_difference_holds_and_its_mirror_is_reversed():
    # d = 0.30, 0.32, 0.34: mean 0.32, s 0.02, t = 0.32 / (0.02 / sqrt 3) = 27.713, p = 0.0013
    holds, mirrored = pair_test([0.30, 0.32, 0.34], 0.02), pair_test([-0.30, -0.32, -0.34], 0.02)
    assert holds.p_difference == pytest.approx(2 * (1 - f2(16 * math.sqrt(3))), abs=1e-9)
    assert judge_pairs([holds]) == ["holds"] and judge_pairs([mirrored]) == ["reversed"]


def test_a_difference_inside_the_margin_is_equivalent():
    # d = 0.001, -0.001, 0.003: mean 0.001, s 0.002; the one-sided tests at +-0.02 give
    # 1 - F(0.021 / se) = 0.0015 and F(-0.019 / se) = 0.0019: both below 0.05
    test = pair_test([0.001, -0.001, 0.003], margin=0.02)
    se = 0.002 / math.sqrt(3)
    assert test.p_equivalence == pytest.approx(max(1 - f2(0.021 / se), f2(-0.019 / se)), abs=1e-9)
    assert test.p_difference == pytest.approx(2 * (1 - f2(0.001 / se)), abs=1e-9)  # 0.478
    assert judge_pairs([test]) == ["equivalent"]


def test_one_seed_is_unresolved_and_a_constant_difference_is_certain():
    assert judge_pairs([pair_test([0.4], 0.02)]) == ["unresolved"]
    assert judge_pairs([pair_test([0.1, 0.1, 0.1], 0.02), pair_test([0.0, 0.0], 0.02)]) == ["holds", "equivalent"]


def test_holms_step_down_needs_every_smaller_p_value_rejected():
    assert holm([0.03, 0.04]) == [False, False]  # 0.03 > 0.05 / 2: the first step fails, so does the rest
    assert holm([0.04, 0.01]) == [True, True]  # 0.01 <= 0.025, then 0.04 <= 0.05
    assert holm([0.01, 0.03, 0.02]) == [True, True, True]  # 0.01 <= 0.0167, 0.02 <= 0.025, 0.03 <= 0.05
    assert holm([0.01, 0.04, 0.03]) == [True, False, False]  # 0.01 <= 0.0167; 0.03 > 0.025 stops
    assert holm([math.nan, 0.001]) == [False, True]
    # a pair that alone would hold (p 0.03) is unresolved beside another pair of the claim
    tests = [PairTest(3, 0.1, 0.05, 0.03, 0.9), PairTest(3, 0.1, 0.05, 0.04, 0.9)]
    assert judge_pairs(tests[:1]) == ["holds"] and judge_pairs(tests) == ["unresolved", "unresolved"]


def test_a_claim_is_reproduced_contradicted_or_partly_with_its_counts():
    assert claim_verdict(["holds", "holds"]) == "reproduced (2 hold, 0 equivalent, 0 reversed, 0 unresolved)"
    assert claim_verdict(["holds", "reversed", "equivalent"]) == "contradicted (1 hold, 1 equivalent, 1 reversed, 0 unresolved)"
    assert claim_verdict(["holds", "equivalent", "unresolved"]) == "partly (1 hold, 1 equivalent, 0 reversed, 1 unresolved)"
    assert claim_verdict([]) == "not comparable"


def test_seeds_planned_by_the_power_of_the_paired_t_test():
    # The one-sample (paired) t test at alpha 0.05, two-sided: 80% power needs n = 34 at an
    # effect of 0.5 standard deviations and n = 10 at 1 (Cohen 1988's tables; G*Power gives the same)
    assert seeds_for_power(0.5, 1.0) == 34 and seeds_for_power(-0.1, 0.1) == 10
    assert power(10, 1.0) == pytest.approx(0.803, abs=1e-3) and power(9, 1.0) < 0.8
    assert seeds_for_power(0.3, 0.0) == 2 and seeds_for_power(0.0, 0.1) is None


def test_a_non_finite_difference_is_refused():
    with pytest.raises(ValueError, match="not finite"):
        pair_test([0.1, math.nan], 0.02)
