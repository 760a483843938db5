"""The statistics module on constructed data whose answers are known by hand."""
import math

import numpy as np
import pytest
import scipy.stats

from llamanat_core.analysis import stats

# ---------------------------------------------------------------- chance

def test_chance_floor():
    assert stats.chance_floor("recall") == 0.25
    assert stats.chance_floor("recall", 8) == 1 / 8
    assert stats.chance_floor("recall", 12) == 1 / 12
    assert stats.chance_floor("addition") == 1 / 1000
    assert stats.chance_floor("addition", 12) == 1 / 1000  # pairs mean nothing for addition
    with pytest.raises(ValueError, match="unknown task"):
        stats.chance_floor("parity")
    assert type(stats.chance_floor("recall", np.int64(8))) is float  # a pairs column's numbers
    for bad in (0, -4, 2.5, True):
        with pytest.raises(ValueError, match="positive whole number of pairs"):
            stats.chance_floor("recall", bad)


def test_chance_ceiling_the_four_numbers():
    assert stats.chance_ceiling("recall", 4) == 60
    assert stats.chance_ceiling("recall", 8) == 33
    assert stats.chance_ceiling("recall", 12) == 23
    assert stats.chance_ceiling("addition") == 1


@pytest.mark.parametrize("task,pairs", [("recall", 4), ("recall", 8), ("recall", 12), ("addition", 4)])
def test_chance_ceiling_is_the_smallest_count_with_cdf_at_least_95(task, pairs):
    k, p = stats.chance_ceiling(task, pairs), stats.chance_floor(task, pairs)
    assert k == scipy.stats.binom.ppf(0.95, 200, p)
    assert scipy.stats.binom.cdf(k, 200, p) >= 0.95 > scipy.stats.binom.cdf(k - 1, 200, p)
    assert scipy.stats.binom.sf(k, 200, p) <= 0.05  # a guesser beats the ceiling at most 5 % of the time


def test_addition_ceiling_does_not_depend_on_the_round_floor():
    for p in (1 / 1799, 1 / 1000, 1 / 900):  # uniform guess, the round figure, the most common sum
        assert scipy.stats.binom.ppf(0.95, 200, p) == 1


def test_at_chance():
    assert stats.at_chance(60 / 200, "recall")
    assert not stats.at_chance(61 / 200, "recall")
    assert not stats.at_chance(60.5 / 200, "recall")  # a mean over seeds may be a fractional count
    assert stats.at_chance(0.0, "recall")
    assert stats.at_chance(33 / 200, "recall", 8) and not stats.at_chance(34 / 200, "recall", 8)
    assert stats.at_chance(23 / 200, "recall", 12) and not stats.at_chance(24 / 200, "recall", 12)
    assert stats.at_chance(0.005, "addition") and not stats.at_chance(0.01, "addition")
    assert not stats.at_chance(math.nan, "recall")
    assert not stats.at_chance(0.9, "recall")


# ---------------------------------------------------------------- the smallest p, Holm

def test_min_sign_flip_p_is_two_over_two_to_the_n():
    assert stats.min_sign_flip_p(10) == 2 / 1024
    assert stats.min_sign_flip_p(1) == 1.0
    assert 0.05 / 7 == pytest.approx(0.0071, abs=1e-4)  # Holm's first step over 7 controls
    assert stats.min_sign_flip_p(10) < 0.05 / 7 < stats.min_sign_flip_p(8)
    # unanimous seeds: only the all-positive and all-negative patterns are as extreme
    up, down = stats.sign_flip_tails(np.ones(10, dtype=int))
    assert 2 * min(up, down) == stats.min_sign_flip_p(10)


def test_holm_by_hand():
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    # capped at 1, monotone in the sorted order
    np.testing.assert_allclose(stats.holm([0.5, 0.2, 0.001]), [0.5, 0.4, 0.003])
    np.testing.assert_allclose(stats.holm([0.9, 0.8]), [1.0, 1.0])


def test_holm_nan_passes_through_and_does_not_count():
    out = stats.holm([0.01, math.nan, 0.04, 0.03])
    assert math.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3]], [0.03, 0.06, 0.06])
    assert np.all(np.isnan(stats.holm([math.nan, math.nan])))
    assert stats.holm([]).shape == (0,)


def test_benjamini_hochberg_by_hand_and_against_holm():
    """q = p · m / rank, made monotone from the top: 0.01, 0.02, 0.03, 0.5 over four become
    0.04, 0.04, 0.04, 0.5; NaN passes through and does not count. It rejects at least what
    Holm rejects (it controls a weaker error), and more on this example."""
    from llamanat_core.analysis.stats import benjamini_hochberg, holm

    np.testing.assert_allclose(benjamini_hochberg([0.03, 0.01, 0.5, 0.02]), [0.04, 0.04, 0.5, 0.04])
    out = benjamini_hochberg([0.02, np.nan, 0.01])
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.02, 0.02])
    p = np.array([0.01, 0.02, 0.03, 0.04, 0.2])
    assert (benjamini_hochberg(p) <= 0.05).sum() == 4 > (holm(p) <= 0.05).sum()
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = rng.uniform(0, 0.1, rng.integers(1, 12))
        assert np.all((holm(p) <= 0.05) <= (benjamini_hochberg(p) <= 0.05))


# ---------------------------------------------------------------- paired solves and censored times

def test_mcnemar_exact_by_hand_and_only_discordant_pairs_count():
    # 8 discordant pairs all one way: 2 / 2^8
    assert stats.mcnemar_exact(8, 0) == pytest.approx(2 / 256)
    assert stats.mcnemar_exact(0, 8) == stats.mcnemar_exact(8, 0)
    # 6 vs 2 of 8: 2 * P(Bin(8, 1/2) <= 2) = 2 * 37 / 256
    assert stats.mcnemar_exact(6, 2) == pytest.approx(2 * 37 / 256)
    assert stats.mcnemar_exact(0, 0) == 1.0 and stats.mcnemar_exact(3, 3) == 1.0
    # counting concordant pairs in n (a plausible mistake) would change the answer: 8 of 18
    assert stats.mcnemar_exact(8, 0) != pytest.approx(2 * scipy.stats.binom.cdf(0, 18, 0.5))
    with pytest.raises(ValueError, match="discordant"):
        stats.mcnemar_exact(-1, 2)


def test_kaplan_meier_treats_a_run_that_never_solved_as_censored():
    t, solved = [100, 200, 300, 400], [True, True, False, True]
    sf = stats.kaplan_meier(t, solved)
    # by hand: 3/4 after 100, 2/4 after 200, the run censored at 300 leaves 1 at risk: 0 after 400
    assert np.allclose(sf.evaluate([100, 200, 300, 400]), [0.75, 0.5, 0.5, 0.0])
    # tying the censored run at 300 as a solve (the mistake) would give 0.25 at 300
    tied = stats.kaplan_meier(t, [True] * 4)
    assert not np.isclose(tied.evaluate(300), sf.evaluate(300))


def test_restricted_mean_is_the_area_under_the_curve_to_the_cap():
    # two runs solve at 100 and 300, one never within the cap of 400: area = 100 + 2/3·200 + 1/3·100
    area = stats.restricted_mean([100, 300, 400], [True, True, False], 400)
    assert area == pytest.approx(100 + 400 / 3 + 100 / 3)
    # followed to the cap, it is the mean of min(step, cap)
    assert stats.restricted_mean([100, 300, 400], [True, True, False], 400) == pytest.approx(800 / 3)
    x = np.array([[[100, 1], [300, 1], [400, 0]]], float)
    assert stats.capped_mean(x)[0] == pytest.approx(800 / 3)
    with pytest.raises(ValueError, match="before the cap"):
        stats.restricted_mean([100, 200], [True, False], 400)


def test_logrank_z_matches_scipy_and_its_sign():
    rng = np.random.default_rng(3)
    a, b = rng.integers(1, 20, 15) * 100.0, rng.integers(5, 30, 15) * 100.0
    ea, eb = a < 1500, b < 1500
    a, b = np.minimum(a, 1500), np.minimum(b, 1500)
    ours = float(stats.logrank_z(a, ea, b, eb))
    theirs = scipy.stats.logrank(scipy.stats.CensoredData(uncensored=a[ea], right=a[~ea]),
                                 scipy.stats.CensoredData(uncensored=b[eb], right=b[~eb]))
    assert abs(ours) == pytest.approx(abs(theirs.statistic), rel=1e-9)
    assert ours > 0  # arm a solves sooner
    # many relabellings at once give the same numbers as one at a time
    both = stats.logrank_z(np.stack([a, b]), np.stack([ea, eb]), np.stack([b, a]), np.stack([eb, ea]))
    assert np.allclose(both, [ours, -ours])


def test_paired_logrank_exact_when_unanimous_and_symmetric_under_swap():
    # ten seeds, the control solves at 100 and the reference at 1,000 on every one: only the
    # all-unswapped pattern is as extreme, so p = 1/1024 one-sided
    c, r = np.full(10, 100.0), np.full(10, 1000.0)
    up, down = stats.paired_logrank_tails(c, np.ones(10, bool), r, np.ones(10, bool))
    assert up == pytest.approx(1 / 1024) and down == 1.0
    # swapping the arms swaps the tails
    assert stats.paired_logrank_tails(r, np.ones(10, bool), c, np.ones(10, bool)) == (down, up)
    # the same data unpaired and pooled (a plausible mistake) would give a far smaller p
    unpaired = scipy.stats.logrank(c, r).pvalue
    assert unpaired < up
    with pytest.raises(ValueError, match="one control and one reference"):
        stats.paired_logrank_tails(c[:5], np.ones(5, bool), r, np.ones(10, bool))


def test_paired_bootstrap_ratio_covers_a_known_ratio_and_can_miss():
    rng = np.random.default_rng(0)
    t_r = rng.uniform(500, 1500, 40)
    x_r = np.column_stack([t_r, np.ones(40)])
    x_c = np.column_stack([2 * t_r, np.ones(40)])
    est, lo, hi = stats.paired_bootstrap_ratio(x_c, x_r, stats.capped_mean, 0.05)
    assert est == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    noisy = np.column_stack([t_r * rng.uniform(0.5, 1.5, 40), np.ones(40)])
    est, lo, hi = stats.paired_bootstrap_ratio(noisy, x_r, stats.capped_mean, 0.05)
    assert lo < est < hi and not lo <= 2.0 <= hi
    assert stats.paired_bootstrap_ratio(noisy, x_r, stats.capped_mean, 0.05) == (est, lo, hi)  # determinism
    with pytest.raises(ValueError, match="level"):
        stats.paired_bootstrap_ratio(noisy, x_r, stats.capped_mean, 1.5)
