"""The corrected construction (`paired`): the two-stage design on the median seed by sign
tests, checked on constructed differences with known answers, beside the registered
sign-flip construction failing where it should."""
import itertools
import math

import numpy as np
import pytest

from llamanat_core.analysis import paired, sequential


def brute_sign_tails(d, theta):
    """P(at least as many above θ) and P(at least as many below), listing every way n fair
    coins can fall."""
    n = len(d)
    above, below = sum(x > theta for x in d), sum(x < theta for x in d)
    heads = [sum(c) for c in itertools.product((0, 1), repeat=n)]
    return np.mean([h >= above for h in heads]), np.mean([h >= below for h in heads])


@pytest.mark.parametrize("d, theta", [([3, 1, -2, 0, 5], 0), ([0, 0, 0], 0), ([1, 2, 3, 4], 2.5),
                                      ([-1, -1, 4, 0, 2, 2, -3], 2)])
def test_sign_tails_count_every_coin(d, theta):
    assert paired.sign_tails(d, theta) == pytest.approx(brute_sign_tails(d, theta), abs=1e-12)


def test_ten_seeds_give_the_order_statistic_intervals():
    """At 0.005 ten seeds give [smallest, largest]; at 0.05 the second smallest and the
    second largest (P(Binomial(10, 1/2) <= 1) = 11/1,024 <= 0.025 < 56/1,024)."""
    d = np.array([7, 3, 9, 5, 5, 6, 4, 8, 6, 7])
    assert paired.interval(d, None, 0.005) == (3.0, 9.0)
    assert paired.interval(d, None, 0.05) == (4.0, 8.0)
    assert paired.interval([1.0], None, 0.05) == (-math.inf, math.inf)  # one pair says nothing


def test_the_interval_agrees_with_the_test_on_both_branches():
    """0 lies outside exactly when p <= level; inside the margin exactly when both one-sided
    tests at the margin's ends reject at half the level."""
    rng = np.random.default_rng(4)
    for _ in range(60):
        first = rng.integers(-20, 30, 10)
        added = rng.integers(-20, 30, 30) if rng.random() < 0.7 else None
        level = float(rng.choice([0.005, 0.0125, 0.05]))
        lo, hi = paired.interval(first, added, level)
        p = sequential.two_sided(*paired.tails(first, added))
        assert (lo > 0 or hi < 0) == (p <= level)
        m = 12.5  # between integers, so no data value sits on a margin's end
        at_ends = paired.tails(first, added, -m)[0], paired.tails(first, added, m)[1]
        tost = max(at_ends) <= level / 2
        assert (-m < lo and hi < m) == tost


def test_the_tails_are_monotone_in_the_median():
    rng = np.random.default_rng(9)
    first, added = rng.integers(-20, 60, 10), rng.integers(-20, 60, 30)
    for a in (None, added):
        t = np.array([paired.tails(first, a, x / 4) for x in range(-100, 300)])
        assert np.all(np.diff(t[:, 0]) >= -1e-12) and np.all(np.diff(t[:, 1]) <= 1e-12)


def skewed_median_zero(rng, n):
    """Most pairs tied at 0, the rest one large positive lump or a few small negatives: the
    median is 0, the mean far from it (the shape that fools a test of symmetry)."""
    u = rng.random(n)
    return np.where(u < 0.5, 0, np.where(u < 0.75, rng.integers(60, 120, n), rng.integers(-6, -1, n)))


def test_no_false_decisions_beyond_the_level_where_symmetry_fails():
    """On skewed differences whose median is 0 the sign test rejects at most at its level,
    on ten seeds and on two stages; the registered sign flips, whose null is symmetry,
    reject the same data far more often (they are testing something else)."""
    rng = np.random.default_rng(0)
    draws = [skewed_median_zero(rng, 40) for _ in range(400)]
    corrected = np.mean([paired.p_value(d[:10], d[10:]) <= 0.05 for d in draws])
    one_stage = np.mean([paired.p_value(d[:10]) <= 0.05 for d in draws])
    registered = np.mean([sequential.p_value(d[:10], d[10:]) <= 0.05 for d in draws])
    assert corrected <= 0.05 and one_stage <= 0.05
    assert registered > 0.5


def test_the_median_interval_covers_on_skewed_tied_data():
    """Coverage of the true median (0) at 95 % over resamples of a skewed, tied population;
    the registered interval, built for a centre of symmetry, misses the median."""
    rng = np.random.default_rng(1)
    draws = [skewed_median_zero(rng, 40) for _ in range(300)]
    hits = [lo <= 0 <= hi for lo, hi in (paired.interval(d[:10], d[10:], 0.05) for d in draws)]
    assert np.mean(hits) >= 0.95
    missed = [not (lo <= 0 <= hi) for lo, hi in
              (sequential.interval(d[:10], d[10:], 0.05, (-150, 150)) for d in draws[:60])]
    assert np.mean(missed) > 0.5


def test_an_early_stop_counts_only_where_stage_one_is_that_extreme():
    """A comparison that stopped after ten seeds is decided only at p <= ALPHA_FIRST (all
    ten one way); nine of ten, a stop the sign test does not pay for, ranks last: p = 1."""
    ten = np.arange(1, 11)
    nine = np.array([-1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert paired.p_value(ten, stopped_early=True) == pytest.approx(2 / 1024)
    assert paired.p_value(nine, stopped_early=True) == 1.0 and paired.p_value(nine) < 0.05
    stopped = paired.decide_paired(nine, unit=1, margin=5, level=0.05)
    assert stopped.verdict == "undecided" and stopped.level == paired.ALPHA_FIRST
    assert paired.decide_paired(nine, unit=1, margin=5, level=0.05, two_stage=False).verdict == "higher"


def test_decide_paired_takes_floats_on_a_stated_grid():
    """Loss differences in nats: the grid says what a tie is; the verdicts read the interval."""
    rng = np.random.default_rng(2)
    first = rng.normal(-0.05, 0.01, 10)
    lower = paired.decide_paired(first, unit=0.001, margin=0.02)
    assert lower.verdict == "lower" and lower.high < 0 and lower.n == 10 and lower.stage == "first stage"
    assert lower.low <= lower.estimate <= lower.high
    tiny = rng.normal(0, 0.0001, 40)  # all under half a unit: every pair a tie
    flat = paired.decide_paired(tiny[:10], tiny[10:], unit=0.001, margin=0.02)
    assert (flat.low, flat.high, flat.verdict, flat.p) == (0.0, 0.0, "equivalent", 1.0)
    noisy = paired.decide_paired(rng.normal(0, 0.05, 10), rng.normal(0, 0.05, 30), unit=0.001, margin=0.002)
    assert noisy.verdict == "undecided" and noisy.stage == "two stages"
    assert paired.first_look(first, unit=0.001, margin=0.02) == "decided"
    assert paired.first_look(tiny[:10], unit=0.001, margin=0.02) == "equivalent"
    with pytest.raises(ValueError, match="finite"):
        paired.decide_paired([0.1, math.nan], unit=0.001, margin=0.02)
    with pytest.raises(ValueError, match="unit must be positive"):
        paired.decide_paired([0.1, 0.2], unit=0, margin=0.02)


def test_sign_p_curve_by_hand():
    theta, p = paired.sign_p_curve([1, 2, 3, 4, 5], pad=1)
    assert theta.tolist() == [0, 1, 2, 3, 4, 5, 6]
    # θ = 0: five of five above, 2 × 1/32; θ = 1: four above, one tied (it counts in n), 2 × 6/32
    assert p.tolist() == pytest.approx([1 / 16, 12 / 32, 1, 1, 1, 12 / 32, 1 / 16])
