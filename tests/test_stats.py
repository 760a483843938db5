"""The statistics module on constructed data whose answers are known by hand."""
import math

import numpy as np
import pytest
import scipy.stats

from llamanat_core import stats

STEPS = np.arange(100, 1001, 100, dtype=float)  # ten runs solving at 100, 200, ..., 1,000
NONE = np.zeros(10, dtype=bool)  # nobody censored
ALL = np.ones(10, dtype=bool)  # everybody censored


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


# ---------------------------------------------------------------- solve rate

def test_solve_rate_clopper_pearson():
    rate, low, high = stats.solve_rate(0, 10)
    assert rate == 0 and low == 0
    assert high == pytest.approx(1 - 0.025 ** (1 / 10))  # closed form when k = 0
    rate, low, high = stats.solve_rate(10, 10)
    assert rate == 1 and high == 1 and low == pytest.approx(0.025 ** (1 / 10))
    rate, low, high = stats.solve_rate(5, 10)
    assert rate == 0.5 and low == pytest.approx(0.1871, abs=1e-4) and high == pytest.approx(0.8129, abs=1e-4)
    assert low == pytest.approx(1 - high)  # symmetric at k = n/2
    with pytest.raises(ValueError):
        stats.solve_rate(3, 2)
    with pytest.raises(ValueError):
        stats.solve_rate(0, 0)


# ---------------------------------------------------------------- Kaplan–Meier

def test_km_uncensored_is_the_empirical_curve():
    est = stats.km(STEPS, NONE)
    np.testing.assert_allclose(est.times, STEPS)
    np.testing.assert_allclose(est.survival, np.linspace(0.9, 0.0, 10), atol=1e-12)
    assert est.n == 10 and est.n_solved == 10
    at = est.evaluate([0, 99, 100, 150, 1000, 5000])
    np.testing.assert_allclose(at, [1, 1, 0.9, 0.9, 0, 0], atol=1e-12)
    assert np.all(est.low <= est.survival + 1e-12) and np.all(est.survival <= est.high + 1e-12)


def test_km_median_uncensored():
    median, low, high = stats.km_median(STEPS, NONE)
    assert median == 500  # first step by which half have solved (np.median would say 550)
    assert low <= 500 <= high < math.inf


def test_km_with_a_censored_run_by_hand():
    # solves at 100, 300, 400; one run censored at 200 (still watched at 200, gone after)
    est = stats.km([100, 200, 300, 400], [False, True, False, False])
    # S: 100 -> 3/4; 200 (censoring) -> 3/4; 300 -> 3/4 * (1 - 1/2) = 3/8; 400 -> 0
    np.testing.assert_allclose(est.survival, [0.75, 0.75, 0.375, 0.0])
    assert stats.km_median([100, 200, 300, 400], [False, True, False, False])[0] == 300


def test_km_median_exactly_half_solved_and_undefined():
    # 5 solve (100..500), 5 censored at the cap: S stays at 1/2 -> median 500, upper end unknown
    steps = np.where(STEPS > 500, 4800, STEPS)
    assert stats.km_median(steps, STEPS > 500)[0] == 500
    assert stats.km_median(steps, STEPS > 500)[2] == math.inf
    # only 4 of 10 solve: S never reaches 1/2, the median is undefined: inf
    median, low, high = stats.km_median(np.where(STEPS > 400, 4800, STEPS), STEPS > 400)
    assert median == math.inf and high == math.inf and low < math.inf
    # nobody solves
    assert stats.km_median(np.full(10, 4800.0), ALL) == (math.inf, math.inf, math.inf)


def test_km_curve_for_plotting():
    x, y = stats.km_curve(np.where(STEPS > 500, 4800, STEPS), STEPS > 500, until=6000)
    assert (x[0], y[0]) == (0, 0)
    assert x[-1] == 6000 and y[-1] == pytest.approx(0.5)
    assert np.all(np.diff(y) >= -1e-12)  # fraction solved never goes down
    np.testing.assert_allclose(y[1:6], [0.1, 0.2, 0.3, 0.4, 0.5])
    x, y = stats.km_curve(np.full(3, 4800.0), np.ones(3, bool))
    assert np.all(y == 0)


def test_fast_km_median_agrees_with_scipy():
    rng = np.random.default_rng(1)
    for _ in range(60):
        n = int(rng.integers(1, 12))
        steps = rng.integers(1, 12, size=n) * 100.0  # many ties between solves and censorings
        cens = rng.random(n) < 0.4
        assert stats._km_median_rows(steps[None], cens[None])[0] == stats.km_median(steps, cens)[0]


def test_km_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.km([], [])
    with pytest.raises(ValueError):
        stats.km([100, 200], [True])
    with pytest.raises(ValueError):
        stats.km([100, math.nan], [False, True])


# ---------------------------------------------------------------- log-rank

def test_logrank_identical_groups():
    cens = STEPS > 700
    assert stats.logrank(STEPS, cens, STEPS, cens) == pytest.approx(1.0)


def test_logrank_separated_groups():
    assert stats.logrank(STEPS, NONE, STEPS + 2000, NONE) < 0.01
    # one group always solves, the other is censored at the cap every time
    z, p = stats.logrank_test(STEPS, NONE, np.full(10, 4800.0), ALL)
    assert p < 0.001 and z > 0  # z > 0: the first group solves sooner
    z, p = stats.logrank_test(np.full(10, 4800.0), ALL, STEPS, NONE)
    assert p < 0.001 and z < 0


def test_logrank_one_against_one_by_hand():
    # at step 1 two runs at risk, one solves: observed 1, expected 1/2, variance 1/4 -> z = 1
    z, p = stats.logrank_test([1.0], [False], [2.0], [True])
    assert z == pytest.approx(1.0)
    assert p == pytest.approx(2 * scipy.stats.norm.sf(1.0))


def test_logrank_nobody_solved():
    assert stats.logrank(np.full(10, 4800.0), ALL, np.full(10, 4800.0), ALL) == 1.0


def test_logrank_everybody_solved_at_one_step():
    solved = np.zeros(4, bool)
    assert stats.logrank_test(np.full(4, 900.0), solved, np.full(4, 900.0), solved) == (0.0, 1.0)


def test_min_logrank_p():
    assert stats.min_logrank_p(10, 10) < 1e-4
    assert stats.min_logrank_p(2, 2) > 0.05  # two seeds a row cannot decide anything
    assert stats.min_logrank_p(0, 10) == 1.0


# ---------------------------------------------------------------- paired sign test under censoring

def test_paired_sign_test_censored_cases():
    a = [100, 300, 200, 500, 900, 4800, 400]
    ca = [False, False, False, False, False, True, False]
    b = [200, 200, 4800, 300, 4800, 4800, 400]
    cb = [False, False, True, True, True, True, False]
    # seed 0: a first; 1: b first; 2: a solved, b censored later -> a first;
    # 3: a solved at 500 after b was censored at 300 -> undecidable; 4: a first (censoring at 4800);
    # 5: both censored -> undecidable; 6: tie -> undecidable
    k_a, k_b, n, p = stats.paired_sign_test_censored(a, ca, b, cb)
    assert (k_a, k_b, n) == (3, 1, 4)
    assert p == pytest.approx(scipy.stats.binomtest(3, 4).pvalue)
    assert p == pytest.approx(0.625)


def test_paired_sign_test_censored_at_the_solve_step_counts():
    # b censored at exactly the step a solved: b had not solved by then, so a was first
    assert stats.paired_sign_test_censored([300], [False], [300], [True])[:3] == (1, 0, 1)


def test_paired_sign_test_unanimous_and_empty():
    k_a, k_b, n, p = stats.paired_sign_test_censored(STEPS, NONE, np.full(10, 4800.0), ALL)
    assert (k_a, k_b, n) == (10, 0, 10) and p == pytest.approx(2 / 1024)
    assert stats.paired_sign_test_censored(np.full(3, 4800.0), np.ones(3, bool),
                                           np.full(3, 4800.0), np.ones(3, bool)) == (0, 0, 0, 1.0)


# ---------------------------------------------------------------- sign flip, bootstrap, Holm

def test_sign_flip_minimum_p_for_unanimous_seeds():
    assert stats.sign_flip_test(np.full(10, 0.2)) == 2 / 1024
    assert stats.sign_flip_test(-np.linspace(0.01, 0.3, 10)) == 2 / 1024
    assert stats.min_sign_flip_p(10) == 2 / 1024
    assert stats.min_sign_flip_p(1) == 1.0
    assert 0.05 / 7 == pytest.approx(0.0071, abs=1e-4)  # Holm's first step over 7 controls
    assert stats.min_sign_flip_p(10) < 0.05 / 7 < stats.min_sign_flip_p(8)


def test_sign_flip_by_hand_and_against_scipy():
    # sums of ±1 ±2 ±3: 6, 4, 2, 0, 0, -2, -4, -6 -> |sum| >= 6 in 2 of 8
    assert stats.sign_flip_test([1, 2, 3]) == 2 / 8
    assert stats.sign_flip_test([1, -1]) == 1.0
    assert stats.sign_flip_test(np.zeros(10)) == 1.0
    rng = np.random.default_rng(0)
    for _ in range(5):
        d = np.round(rng.normal(0.05, 0.1, 10), 3)
        ref = scipy.stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)
        assert stats.sign_flip_test(d) == pytest.approx(ref.pvalue)


def test_sign_flip_beyond_enumeration_uses_scipy_exactly():
    n = stats.MAX_ENUMERATED_PAIRS + 1
    assert stats.sign_flip_test(np.ones(n)) == pytest.approx(2 / 2 ** n)


def test_bootstrap_ci():
    d = np.array([0.1, 0.2, 0.0, 0.3, 0.1, 0.2, 0.1, 0.0, 0.1, 0.2])
    low, high = stats.bootstrap_ci(d)
    assert low < d.mean() < high
    assert 0 <= low and high <= 0.3
    assert stats.bootstrap_ci(d) == (low, high)  # deterministic
    assert stats.bootstrap_ci(np.full(10, 0.04)) == (0.04, 0.04)
    assert stats.bootstrap_ci([0.0] * 10) == (0.0, 0.0)
    low, high = stats.bootstrap_ci(d + 0.5)
    assert low > 0.5
    assert all(math.isnan(v) for v in stats.bootstrap_ci([]))


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
