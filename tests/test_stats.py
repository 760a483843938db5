"""The statistics module on constructed data whose answers are known by hand."""
import math

import numpy as np
import pytest
import scipy.stats

from llamanat_core import stats

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
    from llamanat_core.stats import benjamini_hochberg, holm

    np.testing.assert_allclose(benjamini_hochberg([0.03, 0.01, 0.5, 0.02]), [0.04, 0.04, 0.5, 0.04])
    out = benjamini_hochberg([0.02, np.nan, 0.01])
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.02, 0.02])
    p = np.array([0.01, 0.02, 0.03, 0.04, 0.2])
    assert (benjamini_hochberg(p) <= 0.05).sum() == 4 > (holm(p) <= 0.05).sum()
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = rng.uniform(0, 0.1, rng.integers(1, 12))
        assert np.all((holm(p) <= 0.05) <= (benjamini_hochberg(p) <= 0.05))
