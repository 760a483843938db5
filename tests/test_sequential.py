"""The two-stage design and the exact tests it rests on: constructed cases with known answers."""
import itertools
import math

import numpy as np
import pytest

from llamanat_core.analysis import sequential, stats


def brute_tails(v):
    """P(S* >= S) and P(S* <= S) by listing every sign pattern."""
    v = np.asarray(v)
    sums = [np.dot(s, np.abs(v)) for s in itertools.product((-1, 1), repeat=len(v))]
    s = v.sum()
    return np.mean([x >= s for x in sums]), np.mean([x <= s for x in sums])


@pytest.mark.parametrize("v", [[3], [1, 1, 1], [2, -1, 0], [5, -3, 2, 2, 0, -7, 1], [0, 0],
                               [4, 4, -4, 1, 9, -2]])
def test_sign_flip_tails_count_every_pattern(v):
    assert stats.sign_flip_tails(v) == pytest.approx(brute_tails(v), abs=1e-15)


def test_sign_flip_tails_unanimous_forty_seeds_and_bad_input():
    up, down = stats.sign_flip_tails(np.ones(40, dtype=int))
    assert up == 2.0 ** -40 and down == 1.0
    with pytest.raises(ValueError, match="integer"):
        stats.sign_flip_tails([0.5, 1.0])
    with pytest.raises(ValueError, match="no paired"):
        stats.sign_flip_tails([])


def test_holm_levels_reject_exactly_where_holm_does():
    rng = np.random.default_rng(1)
    for _ in range(300):
        p = rng.uniform(0, 0.06, size=rng.integers(1, 9))
        levels = stats.holm_levels(p)
        np.testing.assert_array_equal(p <= levels, stats.holm(p) <= stats.ALPHA)
    # by hand: 0.03 fails its step (0.025), so 0.04 is held to the same level
    np.testing.assert_allclose(stats.holm_levels([0.03, 0.04]), [0.025, 0.025])
    np.testing.assert_allclose(stats.holm_levels([0.001, 0.04, 0.2]), [0.05 / 3, 0.025, 0.025])


def test_wilson_interval_and_seeds_for_power():
    lo, hi = stats.wilson_interval(5, 10)
    assert lo == pytest.approx(1 - hi) and 0.23 < lo < 0.24
    assert stats.wilson_interval(0, 10)[0] == 0.0 and stats.wilson_interval(10, 10)[1] == pytest.approx(1.0)
    # effect one standard deviation, two-sided 5 %, 80 % power: (1.96 + 0.84)^2 = 7.85 -> 8
    assert stats.seeds_for_power(1.0, 1.0, 0.05) == 8.0
    assert math.isnan(stats.seeds_for_power(0.0, 1.0, 0.05))


def test_the_design_constants():
    assert sequential.MAX_SEEDS == 40 and sequential.W1 ** 2 + sequential.W2 ** 2 == pytest.approx(1)
    # an early stop is always a Holm rejection in a family of seven
    assert sequential.ALPHA_FIRST < stats.ALPHA / 7


def test_a_comparison_decided_early_is_tested_on_stage_one_alone():
    first = np.array([5, 6, 7, 4, 8, 5, 6, 9, 3, 7])  # unanimous: p = 2/1,024
    assert sequential.stops_early(first)
    assert sequential.stagewise_tails(first, np.array([-50] * 30)) == stats.sign_flip_tails(first)


def test_a_continued_comparison_is_ordered_after_every_early_stop():
    first = np.array([3, -1, 2, 0, 1, -2, 4, 1, 0, 2])
    assert not sequential.stops_early(first)
    up, down = sequential.stagewise_tails(first, np.full(30, 5))
    early = float(__import__("scipy").stats.norm.sf(sequential.C1))
    assert early < up < 0.01 and down > 0.99  # strong stage 2, yet never below an early stop


def test_the_interval_agrees_with_the_test():
    """0 lies outside exactly when p <= level; inside the margin exactly when both
    one-sided tests against the margin's ends reject at half the level."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        first = rng.integers(-30, 40, 10)
        added = rng.integers(-30, 40, 30) if rng.random() < 0.7 else None
        level = float(rng.choice([0.005, 0.0071, 0.0125, 0.05]))
        lo, hi = sequential.interval(first, added, level, (-200, 200))
        p = sequential.p_value(first, added)
        assert (lo > 0 or hi < 0) == (p <= level)
        assert sequential.shifted_tails(first, added, 0) == sequential.stagewise_tails(first, added)
        margin = 25
        shifted = [sequential.shifted_tails(first, added, k) for k in (-margin, margin)]
        tost = shifted[0][0] <= level / 2 and shifted[1][1] <= level / 2
        assert (-margin < lo and hi < margin) == tost


def skewed(rng, n):
    """Differences like the study's: most seeds near 0, some one large lump of one sign."""
    return np.where(rng.random(n) < 0.3, rng.integers(60, 120, n), rng.integers(-5, 6, n))


def test_the_tails_are_monotone_in_the_shift_on_both_branches():
    """The bisection relies on it: P(above) never falls and P(below) never rises as the
    shift grows, for stopped and continued comparisons, on the grid of tenths."""
    rng = np.random.default_rng(11)
    cases = [(skewed(rng, 10), skewed(rng, 30)) for _ in range(4)]
    cases += [(np.full(10, 40) + rng.integers(-3, 4, 10), rng.integers(-20, 60, 30)),  # stopped early
              (rng.integers(-30, 40, 10), None)]
    for first, added in cases:
        tails = np.array([sequential.shifted_tails(first, added, k / 10) for k in range(-400, 1400, 7)])
        assert np.all(np.diff(tails[:, 0]) >= -1e-12) and np.all(np.diff(tails[:, 1]) <= 1e-12)


def test_the_ends_on_the_fine_grid_are_those_a_full_search_finds():
    rng = np.random.default_rng(5)
    for _ in range(2):
        first, added = skewed(rng, 10), skewed(rng, 30)
        lo, hi = sequential.interval(first, added, 0.05, (-200, 200))
        steps = np.arange(-100, 1300)  # tenths of a unit
        tails = np.array([sequential.shifted_tails(first, added, k / 10) for k in steps])
        kept = steps[(tails[:, 0] > 0.025) & (tails[:, 1] > 0.025)] / 10
        assert (lo, hi) == (kept.min(), kept.max())
        assert lo == round(lo, 1) and hi == round(hi, 1)
        # whole units: the same ends rounded inwards
        lo1, hi1 = sequential.interval(first, added, 0.05, (-200, 200), grid=1)
        assert (lo1, hi1) == (math.ceil(lo), math.floor(hi))


def test_a_continued_comparison_is_not_rejected_where_shifted_stage_one_would_stop():
    """The stopping rule was applied to the real differences, once: a shift at which the
    first ten seeds alone would have stopped is still judged by the combination."""
    first = np.array([0, 0, 0, 0, 0, 0, 90, 0, 0, 0])  # undecided on ten seeds
    added = np.tile([-40, 35, -10, 5, 0, -8], 5)  # centred near −3
    assert not sequential.stops_early(first)
    assert sequential.stops_early(first + 1)  # shifted by −1, ten seeds would have stopped
    up, down = sequential.shifted_tails(first, added, -1)
    assert sequential.two_sided(up, down) > 0.05
    lo, hi = sequential.interval(first, added, 0.05, (-200, 200))
    assert lo <= -1 < hi


def test_the_estimate_is_where_the_tails_balance_and_inside_every_interval():
    # symmetric differences: the centre is their centre
    symmetric = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) - 5
    assert sequential.estimate(symmetric, None, (-50, 50), (-50, 50)) == 0.5
    assert sequential.estimate(symmetric, None, (-50, 50), (-50, 50), grid=1) == 0.5
    rng = np.random.default_rng(3)
    for _ in range(40):
        first, added = skewed(rng, 10), skewed(rng, 30)
        free = sequential.estimate(first, added, (-200, 200), (-200, 200))
        k = math.ceil(free * 10)  # the first tenth at which the upper tail is at least the lower
        up, down = sequential.shifted_tails(first, added, k / 10)
        up_before, down_before = sequential.shifted_tails(first, added, (k - 1) / 10)
        assert up >= down and up_before < down_before
        for level in (0.005, 0.05):
            lo, hi = sequential.interval(first, added, level, (-200, 200))
            # the balance point lies between two grid shifts, each inside the interval
            assert lo - 0.05 <= free <= hi + 0.05
            assert sequential.estimate(first, added, (-200, 200), (lo, hi)) == min(max(free, lo), hi)


def test_the_rule_sends_on_only_what_can_still_be_decided():
    noisy = np.array([30, -20, 10, -5, 25, -30, 0, 15, -10, 5])
    assert sequential.continues(noisy, both_at_chance=False, margin=(-10, 10))[0]
    assert sequential.continues(noisy, both_at_chance=True, margin=(-10, 10)) == (False, "both at chance")
    assert sequential.continues(np.full(10, 9), both_at_chance=False, margin=(-30, 30)) == \
        (False, "decided on the first 10 seeds")
    tight = np.array([1, -1, 0, 1, 0, -1, 1, 0, 0, -1])
    assert sequential.continues(tight, both_at_chance=False, margin=(-30, 30)) == \
        (False, "equivalent on the first 10 seeds")


def test_tost_power():
    # margin three standard errors past the one-sided critical value at 40 seeds: 2 Φ(z) − 1
    z = 0.15 * math.sqrt(40) / 0.3 - 1.6448536269514722
    assert stats.tost_power(0.15, 0.3, 40) == pytest.approx(2 * 0.5 * (1 + math.erf(z / math.sqrt(2))) - 1)
    assert stats.tost_power(0.01, 1.0, 4) == 0.0  # out of reach: no power, never negative
    assert stats.tost_power(0.15, 0.3, 40) > stats.tost_power(0.15, 0.3, 10)


def test_p_curve_stays_above_the_level_exactly_inside_the_interval():
    d = np.array([3, 1, -1, 2, 4, 2, 3, 1, 2, 5])
    lo, hi = sequential.interval(d, None, 0.05, (-400, 400))
    shifts, p = sequential.p_curve(d, None, (lo, hi), pad=3)
    assert shifts[0] == pytest.approx(lo - 0.3) and shifts[-1] == pytest.approx(hi + 0.3)
    assert len(shifts) == len(p) == round((hi - lo) * sequential.GRID) + 7  # every tenth of a unit
    inside = (shifts > lo - 1e-9) & (shifts < hi + 1e-9)
    assert ((p > 0.05) == inside).all()
    assert p[0] == pytest.approx(sequential.two_sided(*sequential.shifted_tails(d, None, shifts[0])))
    assert p.max() == 1.0  # where the tails balance
