"""The statistics module on constructed data whose answers are known by hand."""
import math

import numpy as np
import pandas as pd
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
    with pytest.raises(ValueError):
        stats.chance_floor("recall", 0)


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


# ---------------------------------------------------------------- verdict rules

def _verdict(**kw):
    base = {"both_at_chance": False, "p_holm": 0.5, "reachable": True, "direction": 1.0,
            "ci_low": -0.2, "ci_high": 0.2, "equivalence": (-0.05, 0.05)}
    return stats.verdict(**{**base, **kw})


def test_verdict_rules():
    assert _verdict(p_holm=0.01) == "better"
    assert _verdict(p_holm=0.01, direction=-0.3) == "worse"
    assert _verdict(ci_low=-0.03, ci_high=0.04) == "equivalent"
    assert _verdict() == "undecided"
    assert _verdict(p_holm=0.05) == "undecided"  # the level is strict
    assert _verdict(p_holm=math.nan) == "undecided"
    # never decided at chance, never decided by a test that could not reach the level
    assert _verdict(p_holm=0.001, both_at_chance=True) == "both at chance"
    assert _verdict(p_holm=0.001, reachable=False) == "undecided"
    assert _verdict(ci_low=0.9, ci_high=1.1, equivalence=stats.RATIO_BOUNDS) == "equivalent"
    assert _verdict(ci_low=0.9, ci_high=math.inf, equivalence=stats.RATIO_BOUNDS) == "undecided"


# ---------------------------------------------------------------- verdicts on a synthetic results frame

SEEDS = range(10)


def _run_rows(measurement, task, variant, seed, acc, solve, *, regime="finite", answer="name",
              theta=10_000.0, acc8=math.nan, acc12=math.nan, stop_acc=None):
    """The rows the study writes for one run: checkpoints 300..1,200, plus the stop if later."""
    censored = solve is None
    stop = 4800 if censored else max(1200, solve + 200)  # stops after 3 solved evaluations in a row
    key = f"{task}-{variant}-{regime}-{answer}-{theta:g}-{seed}"
    steps = [300, 600, 900, 1200] + ([stop] if stop > 1200 else [])
    rows = []
    for step in steps:
        at_1200 = step == 1200
        rows.append({
            "measurement": measurement, "run": key, "task": task, "variant": variant, "regime": regime,
            "seed": seed, "answer": answer, "rope_theta": theta, "tie_embeddings": variant != "untied",
            "params": 102_528, "steps": 4800, "min_steps": 1200, "step": step, "final": at_1200,
            "at_stop": step == stop, "train_loss": 0.1, "val_loss": 0.2,
            "test_acc": acc if at_1200 else (stop_acc if stop_acc is not None else acc),
            "test_acc_8": acc8 if at_1200 else math.nan, "test_acc_12": acc12 if at_1200 else math.nan,
            "final_loss": 0.1, "solve_step": math.nan if censored else float(solve), "censored": censored,
            "stop_step": stop})
    return rows


def _recall_rows(measurement, variant, s, **kw):
    """Recall rows of one run of the synthetic matrix: llama plus four controls with known verdicts."""
    base = 0.6 + 0.02 * s
    acc, solve = {
        "llama": (base, 1000 + 100 * s),
        "layernorm": (base + 0.15 + 0.005 * s, 300 + 100 * (s // 2)),  # better, solves sooner
        "postnorm": (base - 0.2 - 0.005 * s, None),  # worse, never solves
        "gelu_mlp": (base + (0.01 if s % 2 else -0.01), 1000 + 100 * s),  # equivalent
        "mha": (base + (0.3 if s % 2 else -0.3), 200 if s % 2 else None),  # undecided
    }[variant]
    return _run_rows(measurement, "recall", variant, s, acc, solve, acc8=acc - 0.1, acc12=acc - 0.2, **kw)


def _addition_rows(variant, s):
    """Addition at chance: nobody solves; the control gets 1 of 200 right on every seed."""
    acc = 0.005 if variant == "layernorm" else 0.0
    return _run_rows("matrix", "addition", variant, s, acc, None, stop_acc=acc)


MATRIX = ("llama", "layernorm", "postnorm", "gelu_mlp", "mha")


@pytest.fixture(scope="module")
def results():
    rows = []
    for s in SEEDS:
        for v in MATRIX:
            rows += _recall_rows("matrix", v, s)
            rows += _recall_rows("length", v, s)  # the same runs listed again
            rows += _addition_rows(v, s)
        # sweep: theta 10,000 is the matrix llama run; theta 10 never solves, 1,000,000 like llama
        rows += _recall_rows("sweep", "llama", s)
        rows += _run_rows("sweep", "recall", "llama", s, 0.26, None, theta=10.0, acc8=0.2, acc12=0.1,
                          stop_acc=0.26)
        rows += _run_rows("sweep", "recall", "llama", s, 0.6 + 0.02 * s, 1000 + 100 * s, theta=1e6,
                          acc8=0.5 + 0.02 * s, acc12=0.4 + 0.02 * s)
        # alphabet: llama's "name" runs only in the matrix rows; untied with both answers
        rows += _recall_rows("alphabet", "llama", s, answer="copy")
        rows += _run_rows("alphabet", "recall", "untied", s, 0.7, 900, answer="name", acc8=0.5)
        rows += _run_rows("alphabet", "recall", "untied", s, 0.7 + 0.01 * (s % 3), 900, answer="copy",
                          acc8=0.5)
    # seed 9 of mha recall is missing from the results (e.g. a run that failed)
    df = pd.DataFrame(rows)
    drop = (df.variant == "mha") & (df.task == "recall") & (df.seed == 9)
    return df[~drop].reset_index(drop=True)


@pytest.fixture(scope="module")
def table(results):
    return stats.verdicts(results)


def _get(table, measurement, comparison, metric, task="recall"):
    row = table[(table.measurement == measurement) & (table.comparison == comparison)
                & (table.metric == metric) & (table.task == task)]
    assert len(row) == 1, (measurement, comparison, metric, task, len(row))
    return row.iloc[0]


def test_verdicts_columns_and_every_verdict(table):
    for col in ("comparison", "task", "regime", "metric", "effect", "ci_low", "ci_high", "p", "test",
                "verdict", "n", "p_holm", "p_sign", "reference", "control", "measurement"):
        assert col in table.columns
    assert set(table.verdict) == set(stats.VERDICTS)
    assert set(table.verdict) <= set(stats.VERDICTS)


def test_verdicts_accuracy_at_1200(table):
    m = "test_acc@1200"
    better = _get(table, "matrix", "layernorm vs llama", m)
    assert better.verdict == "better" and better.effect > 0.15 and better.p == 2 / 1024
    assert better.p_holm < 0.05 and better.test.startswith("exact sign-flip")
    assert better.n == 10 and better.ci_low > 0
    worse = _get(table, "matrix", "postnorm vs llama", m)
    assert worse.verdict == "worse" and worse.effect < 0 and worse.ci_high < 0
    equivalent = _get(table, "matrix", "gelu_mlp vs llama", m)
    assert equivalent.verdict == "equivalent"
    assert -0.05 <= equivalent.ci_low <= equivalent.ci_high <= 0.05
    undecided = _get(table, "matrix", "mha vs llama", m)
    assert undecided.verdict == "undecided" and undecided.n == 9  # only seeds present in both rows


def test_verdicts_holm_family(table):
    family = table[(table.measurement == "matrix") & (table.task == "recall")
                   & (table.metric == "test_acc@1200")]
    assert len(family) == 4 and set(family.family_size) == {4}
    np.testing.assert_allclose(family.p_holm, stats.holm(family.p))
    assert np.all(family.p_holm >= family.p)


def test_verdicts_time_to_solve(table):
    m = "time_to_solve"
    better = _get(table, "matrix", "layernorm vs llama", m)
    assert better.verdict == "better" and better.test.startswith("log-rank")
    assert better.effect < 1 and better.ci_high < 1  # control / reference medians: solves sooner
    assert better.reference_value == 1400 and better.control_value == 500
    assert better.solved_reference == "10/10" and 0 <= better.p_sign <= 1
    worse = _get(table, "matrix", "postnorm vs llama", m)
    assert worse.verdict == "worse" and worse.effect == math.inf and worse.solved_control == "0/10"
    equivalent = _get(table, "matrix", "gelu_mlp vs llama", m)
    assert equivalent.verdict == "equivalent" and equivalent.effect == 1.0
    assert 0.8 <= equivalent.ci_low <= equivalent.ci_high <= 1.25
    assert _get(table, "matrix", "mha vs llama", m).verdict == "undecided"


def test_verdicts_never_decide_at_chance(table):
    addition = table[table.task == "addition"]
    assert len(addition) == 8 and set(addition.verdict) == {"both at chance"}
    # 1 of 200 against 0 of 200 on every seed: the sign-flip p is as small as it gets, still not decided
    row = _get(table, "matrix", "layernorm vs llama", "test_acc@1200", task="addition")
    assert row.p == 2 / 1024 and row.verdict == "both at chance"
    assert _get(table, "matrix", "layernorm vs llama", "time_to_solve", task="addition").p == 1.0


def test_verdicts_length_counts_each_run_once(table):
    length = table[table.measurement == "length"]
    assert set(length.metric) == {"test_acc_8@1200", "test_acc_12@1200"}
    assert len(length) == 8  # 4 controls x 2 metrics, although the runs are listed under two measurements
    assert set(length[length.comparison != "mha vs llama"].n) == {10}
    assert not table[(table.measurement == "matrix")].metric.str.startswith("test_acc_").any()
    assert _get(table, "length", "layernorm vs llama", "test_acc_8@1200").verdict == "better"


def test_verdicts_sweep_and_alphabet(table):
    sweep = table[table.measurement == "sweep"]
    small, large = "rope_theta=10 vs rope_theta=10,000", "rope_theta=1,000,000 vs rope_theta=10,000"
    assert set(sweep.comparison) == {small, large}
    low = _get(table, "sweep", small, "test_acc@1200")
    assert low.verdict == "worse" and low.n == 10
    assert _get(table, "sweep", small, "time_to_solve").verdict == "worse"
    assert _get(table, "sweep", large, "time_to_solve").verdict == "equivalent"
    alphabet = table[table.measurement == "alphabet"]
    assert set(alphabet.comparison) == {"copy vs name (llama)", "copy vs name (untied)"}
    assert set(alphabet.metric) == {"time_to_solve", "test_acc@1200", "test_acc_8@1200"}
    # llama's name runs exist only among the matrix rows, and are found there; copy scores the same here
    same = _get(table, "alphabet", "copy vs name (llama)", "test_acc@1200")
    assert same.n == 10 and same.effect == 0 and same.p == 1 and same.verdict == "equivalent"
    assert _get(table, "alphabet", "copy vs name (untied)", "test_acc@1200").verdict == "equivalent"
    # both untied rows solve at 900 on every seed: log-rank has nothing to go on, p = 1
    tied = _get(table, "alphabet", "copy vs name (untied)", "time_to_solve")
    assert tied.p == 1.0 and tied.effect == 1.0 and tied.verdict == "equivalent"


def test_verdicts_cannot_decide_with_too_few_seeds(results):
    few = results[results.seed < 4]  # 4 seeds: the smallest sign-flip p is 2/16
    table = stats.verdicts(few[few.measurement == "matrix"])
    row = _get(table, "matrix", "layernorm vs llama", "test_acc@1200")
    assert row.p == 2 / 16 and row.p_min == 2 / 16 and not row.reachable
    assert row.verdict == "undecided"


def test_verdicts_regimes_are_separate_families_and_unsolved_is_not_chance():
    rows = []
    for s in SEEDS:
        rows += _recall_rows("matrix", "llama", s)
        rows += _recall_rows("matrix", "layernorm", s)
        # fresh data: nobody solves, but both rows are well above chance (0.7 of 200 at the stop)
        rows += _run_rows("matrix", "recall", "llama", s, 0.7, None, regime="fresh", stop_acc=0.7)
        rows += _run_rows("matrix", "recall", "layernorm", s, 0.7, None, regime="fresh", stop_acc=0.72)
    table = stats.verdicts(pd.DataFrame(rows))
    matrix = table[table.measurement == "matrix"]
    assert len(matrix) == 4 and set(matrix.family_size) == {1}  # one control per task x regime x metric
    # the fresh runs carry no 8/12-pair accuracies here: no pairs, no test, no verdict
    no_data = table[(table.measurement == "length") & (table.regime == "fresh")]
    assert len(no_data) == 2 and set(no_data.n) == {0} and set(no_data.verdict) == {"undecided"}
    assert no_data.p.isna().all() and set(no_data.family_size) == {0}
    fresh = table[(table.regime == "fresh") & (table.metric == "time_to_solve")].iloc[0]
    assert fresh.p == 1.0 and fresh.solved_control == "0/10"
    assert math.isnan(fresh.effect)  # neither median is defined: no ratio
    assert fresh.verdict == "undecided"  # not solved is not "at chance"
    finite = table[(table.regime == "finite") & (table.metric == "time_to_solve")].iloc[0]
    assert finite.verdict == "better"


def test_verdicts_deterministic(results, table):
    again = stats.verdicts(results)
    pd.testing.assert_frame_equal(table, again)


def test_verdicts_of_nothing():
    empty = stats.verdicts(pd.DataFrame(_run_rows("matrix", "recall", "llama", 0, 0.5, 400)))
    assert len(empty) == 0 and "verdict" in empty.columns


def test_power_statement():
    assert "2/1,024" in stats.POWER and "0.0071" in stats.POWER
