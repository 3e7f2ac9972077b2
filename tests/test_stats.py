"""Paired A/B statistics (ce_runtime/report/stats.py) against numbers worked out by hand.

Sign-flip p-values are exact enumerations: for differences d_1..d_n the p-value is the
share of the 2^n sign assignments whose |sum| reaches the observed |sum|. Bootstrap
intervals are checked where the bootstrap distribution is known in closed form.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from ce_runtime.report.frames import trials_frame
from ce_runtime.report.stats import (
    PairedComparison,
    paired_comparison,
    paired_stats,
    per_task_scores,
    quantile,
    sign_flip_p_value,
)
from ce_runtime.report.stats import _flipped_sum_distribution as flipped_sums


def trial(variant, task, repeat=0, *, score, status=None, row=None):
    status = status or ("SUCCESS" if score is not None and score >= 0.9 else "FAILURE")
    return {"trial_id": f"{variant}/{task}/{repeat:02d}", "variant_id": variant,
            "task_id": f"{task}/{row}" if row else task, "row_id": row, "repeat": repeat,
            "status": status, "weighted_score": score, "criteria": []}


def brute_force_p(diffs):
    observed = abs(sum(Fraction(d) for d in diffs))
    hits = sum(abs(sum(s * Fraction(d) for s, d in zip(signs, diffs, strict=True))) >= observed
               for signs in itertools.product((1, -1), repeat=len(diffs)))
    return hits / 2 ** len(diffs)


def test_three_equal_wins_p_is_two_in_eight():
    # ±1±1±1: sums -3,-1,1,3 with 1,3,3,1 assignments; |sum| >= 3 in 2 of 8
    p, test = sign_flip_p_value([1.0, 1.0, 1.0], random.Random(0), 100)
    assert (p, test) == (0.25, "exact")


def test_mixed_differences_p_by_hand():
    # d = 0.5, 0.25, -0.25: observed sum 0.5. Sums of ±0.5±0.25±0.25:
    # 1.0, 0.5, 0.5, 0.0, 0.0, -0.5, -0.5, -1.0 -> |sum| >= 0.5 in 6 of 8
    p, _ = sign_flip_p_value([0.5, 0.25, -0.25], random.Random(0), 100)
    assert p == 0.75
    # zeros change nothing (their sign is irrelevant)
    assert sign_flip_p_value([0.5, 0.0, 0.25, -0.25], random.Random(0), 100)[0] == 0.75


def test_no_difference_p_is_one():
    assert sign_flip_p_value([0.0, 0.0], random.Random(0), 100) == (1.0, "exact")


@pytest.mark.parametrize("seed", range(5))
def test_exact_p_matches_brute_force(seed):
    rng = random.Random(seed)
    diffs = [rng.choice([-1, -0.5, 0, 0.25, 0.5, 1, 0.3]) for _ in range(rng.randint(1, 10))]
    assert sign_flip_p_value(diffs, random.Random(0), 10)[0] == pytest.approx(
        float(brute_force_p(diffs)), abs=1e-12)


def test_monte_carlo_when_the_exact_distribution_is_too_large():
    # 40 distinct irrational-ish magnitudes: 2^40 sums, beyond the exact limit.
    diffs = [(i + 1) ** 0.5 / 7 for i in range(40)]
    p, test = sign_flip_p_value(diffs, random.Random(1), 2000)
    assert test == "monte-carlo"
    # every d is positive: the observed sum is the largest possible one, hit by no
    # random draw (the all-plus draw has probability 2^-40), so p = 1 / (1 + 2000)
    assert p == pytest.approx(1 / 2001)


def test_quantile_is_linear_between_ranks():
    assert quantile([0.0, 1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert quantile([0.0, 10.0], 0.25) == 2.5
    assert quantile([5.0], 0.975) == 5.0


def test_bootstrap_of_two_points_spans_them():
    # d = 0, 1: resampled means are 0, 0.5, 1 with chances 1/4, 1/2, 1/4; the 2.5% and
    # 97.5% points are therefore 0 and 1
    c = paired_stats([("t1", 0.0, 0.0), ("t2", 0.0, 1.0)], "a", "b", resamples=4000)
    assert (c.ci_low, c.ci_high) == (0.0, 1.0)
    assert c.mean_diff == 0.5
    assert (c.wins, c.losses, c.ties) == (1, 0, 1)
    assert c.p_value == 1.0  # ±1: both sign assignments reach |1|
    assert not c.significant


def test_constant_difference_interval_is_a_point_and_significant():
    rows = [(f"t{i}", 0.5, 0.75) for i in range(6)]
    c = paired_stats(rows, "a", "b")
    assert (c.ci_low, c.ci_high, c.mean_diff) == (0.25, 0.25, 0.25)
    assert c.p_value == 2 / 64  # all six +: only all-plus and all-minus reach 1.5
    assert c.significant
    assert (c.mean_a, c.mean_b) == (0.5, 0.75)


def test_same_seed_same_interval_other_seed_may_differ():
    rng = random.Random(3)
    rows = [(f"t{i}", rng.random(), rng.random()) for i in range(30)]
    one = paired_stats(rows, "a", "b", seed=7, resamples=500)
    two = paired_stats(rows, "a", "b", seed=7, resamples=500)
    assert one == two
    assert one.ci_low < one.mean_diff < one.ci_high


def test_paired_comparison_over_a_trials_frame():
    records = [
        # t1: A mean (1.0 + 0.5)/2 = 0.75, B 1.0 -> +0.25
        trial("A", "t1", 0, score=1.0), trial("A", "t1", 1, score=0.5),
        trial("B", "t1", 0, score=1.0),
        # t2: A 1.0, B 0.0 -> -1.0
        trial("A", "t2", score=1.0), trial("B", "t2", score=0.0),
        # t6: B errored before grading (no score): not in the score pairing, a pass-rate
        # loss (1 -> 0)
        trial("A", "t6", score=1.0), trial("B", "t6", score=None, status="ERROR"),
        # t3: equal
        trial("A", "t3", score=0.5), trial("B", "t3", score=0.5),
        # t4 only in A, t5 ungraded in B: not paired
        trial("A", "t4", score=1.0),
        trial("A", "t5", score=1.0), trial("B", "t5", score=None, status="NOT_GRADED"),
        # a dataset row
        trial("A", "ds", score=0.0, row="r1"), trial("B", "ds", score=1.0, row="r1"),
    ]
    frame = trials_frame(records)
    c = paired_comparison(frame, "A", "B")
    assert isinstance(c, PairedComparison)
    assert c.n_tasks == 4
    assert c.mean_a == pytest.approx((0.75 + 1.0 + 0.5 + 0.0) / 4)
    assert c.mean_b == pytest.approx((1.0 + 0.0 + 0.5 + 1.0) / 4)
    assert c.mean_diff == pytest.approx((0.25 - 1.0 + 0 + 1.0) / 4)
    assert (c.wins, c.losses, c.ties) == (2, 1, 1)
    # d = 0.25, -1, 1 (and a 0): observed |sum| 0.25; sums ±0.25±1±1 are
    # ±2.25, ±1.75, ±0.25 (x2 each sign) -> every assignment reaches 0.25: p = 1
    assert c.p_value == 1.0 and c.test == "exact"
    assert c.most_divergent == (("ds/r1", 0.0, 1.0), ("t2", 1.0, 0.0), ("t1", 0.75, 1.0))
    assert c.ci_low <= c.mean_diff <= c.ci_high

    rate = paired_comparison(frame, "A", "B", metric="pass_rate")
    # pass rates: t1 A 1/2 B 1; t2 A 1 B 0; t3 0 0; t6 1 0; ds 0 1
    assert rate.n_tasks == 5
    assert rate.mean_diff == pytest.approx((0.5 - 1 + 0 - 1 + 1) / 5)
    assert (rate.wins, rate.losses, rate.ties) == (2, 2, 1)
    assert per_task_scores(frame, "A", "pass_rate")[("t1", "")] == 0.5

    d = c.to_dict()
    assert d["most_divergent"][0] == {"task": "ds/r1", "a": 0.0, "b": 1.0, "diff": 1.0}
    assert d["significant"] is False


def test_no_shared_tasks():
    frame = trials_frame([trial("A", "t1", score=1.0), trial("B", "t2", score=1.0)])
    c = paired_comparison(frame, "A", "B")
    assert c.n_tasks == 0 and c.mean_diff is None and c.p_value is None
    assert (c.wins, c.losses, c.ties) == (0, 0, 0)


def test_pass_rate_differences_stay_exact_for_many_tasks():
    # 300 tasks, each +1/3 (one more of three repeats passed): only the all-plus and
    # all-minus assignments reach |sum| = 100, so p = 2 / 2^300, computed exactly
    p, test = sign_flip_p_value([1 / 3] * 300, random.Random(0), 10)
    assert test == "exact"
    assert p == 2 / 2 ** 300
    # 2/3 and -1/3 mixed: the grid makes 0.6666666666666666 and 2 * (1/3) the same step
    diffs = [2 / 3, -1 / 3, 1 / 3, 2 / 3, -2 / 3, 1 / 3]
    assert sign_flip_p_value(diffs, random.Random(0), 10)[0] == pytest.approx(
        float(brute_force_p([Fraction(2, 3), Fraction(-1, 3), Fraction(1, 3),
                             Fraction(2, 3), Fraction(-2, 3), Fraction(1, 3)])))


def test_report_golden_pass_rate_p_by_hand():
    # tests/golden/report.md's paired pass rates (with-skill vs baseline): four routing
    # rows +1 or -1 (r2, r3, r5 up, r4 down), fix-bug +1/3, write-docs +1, four ties.
    # In thirds the magnitudes are 3,3,3,3,3,1 (total 16) and the observed sum is 10;
    # an assignment flipping magnitudes summing to t has |16 - 2t| >= 10 iff t <= 3 or
    # t >= 13: t in {0, 1, 3} in 1 + 1 + 5 ways, and as many above: p = 14 / 64
    diffs = [0, 1, 1, -1, 1, 0, 0, 0, 1 / 3, 1]
    c = paired_stats([(f"t{i}", 0.0, d) for i, d in enumerate(diffs)], "a", "b")
    assert c.p_value == 14 / 64
    assert (c.wins, c.losses, c.ties) == (5, 1, 4)
    assert c.mean_diff == pytest.approx(1 / 3)


def test_resamples_shrink_for_thousands_of_tasks():
    from ce_runtime.report.stats import effective_resamples

    assert effective_resamples(5000, 10) == 5000
    assert effective_resamples(5000, 2000) == 2500  # 5 million draws
    assert effective_resamples(5000, 100_000) == 1000  # never below 1000
    rng = random.Random(5)
    rows = [(f"t{i}", rng.random(), rng.random()) for i in range(2000)]
    c = paired_stats(rows, "a", "b")
    assert c.resamples == 2500 and c.test == "monte-carlo"
    assert c.ci_low < c.mean_diff < c.ci_high


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_a_point_interval_over_too_few_tasks_is_not_significant(n):
    # every task down by 1.0: the bootstrap interval is the point [-1, -1], which
    # excludes 0, but the exact sign-flip p is 2 / 2^n (1, 0.5, 0.25, 0.0625): no
    # evidence at 95%, so the HTML report must not mark the drop as significant
    rows = [(f"t{i}", 1.0, 0.0) for i in range(n)]
    c = paired_stats(rows, "a", "b")
    assert (c.ci_low, c.ci_high) == (-1.0, -1.0)
    assert c.p_value == 2 / 2 ** n
    assert not c.significant and c.to_dict()["significant"] is False
    # one more task than 5 and it is: p = 2 / 64 < 0.05
    assert paired_stats([*rows, *[(f"u{i}", 1.0, 0.0) for i in range(6 - n)]],
                        "a", "b").significant


def test_an_exact_distribution_out_of_reach_is_given_up_before_it_is_built():
    # 30,000 pass-rate differences of 1, 2 or 3 grid steps: the exact distribution needs
    # far more than EXACT_WORK steps, so the answer is None (Monte Carlo); it used to be
    # None only after enumerating the first group of ~10,000 with its binomial
    # coefficients (10 s; minutes for 100,000 tasks). A bound on the work says so at once.
    # (how fast is not asserted here: speed belongs to bench/, not to tests)
    rng = random.Random(1)
    values = [rng.choice([1, 2, 3]) for _ in range(30_000)]
    assert flipped_sums(values) is None
    # and within reach it is still exact: 3 x 200 equal magnitudes
    small = [1] * 200 + [2] * 200 + [3] * 200
    dist = flipped_sums(small)
    assert dist is not None and sum(dist.values()) == 2 ** 600
