"""Statistics on plain arrays: chance floors, solve rates, time to solve, paired tests,
intervals and multiplicity.

Every function here is small, takes numbers (not the study), and names the test it
runs. Nothing here trains, plots or reads files: numpy and scipy only. Which rows are
compared, and the verdict each comparison gets, live in `llamanat_core.comparisons`.

- **chance**: the floor of guessing per task and length, and the count of 200 items a
  guesser stays under (an exact binomial quantile);
- **time to solve**: Kaplan–Meier curves (censoring is information, not missing data),
  the median step to solve with its interval, the log-rank test, a paired
  censoring-aware sign test;
- **paired differences**: an exact sign-flip permutation test (all 2^n flips) and a
  bootstrap interval of the mean difference;
- **multiplicity**: Holm–Bonferroni.

Power, stated (see `POWER`): ten paired seeds cannot decide much at a checkpoint.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.stats

ALPHA = 0.05
"""Family-wise level of every verdict (after Holm)."""

CONFIDENCE = 0.95
"""Level of every interval reported."""

EQUIVALENCE_MARGIN = 0.05
"""Accuracy rows are `equivalent` when the 95 % interval of the mean difference lies inside ±5 points."""

RATIO_BOUNDS = (0.8, 1.25)
"""Time to solve is `equivalent` when the interval of the median ratio lies inside 0.8–1.25."""

N_ITEMS = 200
"""Validation and test sets have 200 items each."""

POWER = """\
With n paired seeds the exact two-sided sign-flip test enumerates 2^n sign patterns, and
the most extreme data (every seed's difference of the same sign) give p = 2 / 2^n: with 10
seeds that is 2/1,024 ≈ 0.002, the smallest p the test can return (`min_sign_flip_p`).
Holm over the 7 controls of one family asks the smallest p to be below 0.05/7 ≈ 0.0071, so
only near-unanimous seeds decide a checkpoint metric, and a sign test on who solved first
(which drops undecidable pairs) needs about 10 of 10. The log-rank test uses every event
time rather than only signs, which is why it decides time to solve. A comparison whose test
could not reach the level, whatever the data, is never called decided: it stays
`undecided`."""


def min_sign_flip_p(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give with n pairs: 2 / 2^n.

    Only the all-positive and the all-negative sign patterns are as extreme as unanimous
    data, out of 2^n equally likely patterns. With one pair it is 1 (nothing can be
    decided); with 10 pairs 2/1,024 ≈ 0.002.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return min(1.0, 2.0 / 2.0 ** n)


# ---------------------------------------------------------------- chance

def chance_floor(task: str, n_pairs: int = 4) -> float:
    """Accuracy of guessing, per item.

    recall with n pairs: 1/n. The answer is one of the item's n values, and the values of
    an item are distinct, so a model that has found the value slots but not the binding
    (the plateau at loss ln n) is right one time in n.

    addition: 1/1,000, a round figure. The sum of two operands from 100–999 is one of
    1,799 values (200–1,998); guessing uniformly among them is right 1 time in 1,799, and
    always answering the most common sum (1,099, reached by 900 of the 810,000 operand
    pairs) 1 time in 900. The floor is of that order, and the chance ceiling over 200 items
    is 1 item for any of these three figures, so the round number changes nothing.
    """
    if task == "recall":
        if not isinstance(n_pairs, int | np.integer) or isinstance(n_pairs, bool) or n_pairs < 1:
            raise ValueError(f"recall chance needs a positive whole number of pairs, got {n_pairs!r}")
        return 1.0 / int(n_pairs)
    if task == "addition":
        return 1.0 / 1000
    raise ValueError(f"unknown task {task!r}; choose 'addition' or 'recall'")


def chance_ceiling(task: str, n_pairs: int = 4, n_items: int = N_ITEMS, level: float = 0.95) -> int:
    """The most items a guesser gets right, at the 95 % level: counts at or below it are at chance.

    Definition: the smallest count k with P(X <= k) >= `level` for X ~ Binomial(n_items,
    floor), i.e. the exact binomial quantile `scipy.stats.binom.ppf(level, n_items, floor)`.
    Guessing exceeds k with probability at most 1 - level, so a count above k is a
    one-sided binomial test against guessing at the 5 % level. Over 200 items: recall at
    4 pairs 60, at 8 pairs 33, at 12 pairs 23; addition 1.
    """
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items}")
    return int(scipy.stats.binom.ppf(level, n_items, chance_floor(task, n_pairs)))


def at_chance(acc: float, task: str, n_pairs: int = 4, n_items: int = N_ITEMS) -> bool:
    """Is an accuracy (a fraction of `n_items`) within the chance ceiling? NaN is not at chance.

    A mean over seeds may be a fractional count; it is at chance when it is at or below
    the ceiling (60.0 of 200 is, 60.5 is not).
    """
    if acc is None or not np.isfinite(acc):
        return False
    return bool(round(float(acc) * n_items, 9) <= chance_ceiling(task, n_pairs, n_items))


# ---------------------------------------------------------------- solve rate

def solve_rate(k: int, n: int) -> tuple[float, float, float]:
    """k of n runs solved: (k/n, low, high) with the exact 95 % Clopper–Pearson interval.

    Clopper–Pearson inverts two one-sided binomial tests, so its coverage is at least 95 %
    for every true rate, which matters at n = 10 where normal approximations fail (and
    it gives a sensible interval at 0 of 10 and 10 of 10).
    """
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    ci = scipy.stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return k / n, float(ci.low), float(ci.high)


# ---------------------------------------------------------------- time to solve

def _check_times(steps, censored) -> tuple[np.ndarray, np.ndarray]:
    steps = np.asarray(steps, dtype=float).ravel()
    censored = np.asarray(censored, dtype=bool).ravel()
    if steps.shape != censored.shape:
        raise ValueError(f"steps and censored differ in length: {steps.size} vs {censored.size}")
    if steps.size == 0:
        raise ValueError("no runs")
    if not np.all(np.isfinite(steps)) or np.any(steps < 0):
        raise ValueError("steps must be finite and >= 0 (a censored run's step is its censoring time)")
    return steps, censored


def _censored_data(steps, censored) -> scipy.stats.CensoredData:
    return scipy.stats.CensoredData(uncensored=steps[~censored], right=steps[censored])


@dataclass(frozen=True)
class KaplanMeier:
    """A Kaplan–Meier estimate of S(t), the fraction of runs not yet solved by step t.

    `times` are the distinct observed steps (solves and censorings); `survival[i]` is
    S just after `times[i]` (a right-continuous step function, S = 1 before the first
    solve); `low`/`high` are its pointwise 95 % band (Greenwood variance on the log(-log S)
    scale, which keeps the band inside [0, 1] and covers better than the linear band at ten
    runs).
    """

    times: np.ndarray
    survival: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: int
    n_solved: int

    def evaluate(self, t) -> np.ndarray:
        """S(t) at the steps `t` (the fraction of runs not yet solved by step t)."""
        idx = np.searchsorted(self.times, np.asarray(t, dtype=float), side="right") - 1
        return np.where(idx < 0, 1.0, self.survival[np.clip(idx, 0, None)])


def km(steps, censored) -> KaplanMeier:
    """Kaplan–Meier estimate of time to solve, via `scipy.stats.ecdf` on `CensoredData`.

    `steps[i]` is run i's solve step, or its censoring time (its stop step) when
    `censored[i]`. Kaplan–Meier is the estimator that uses a censored run for as long as
    it was watched: it counts as "not solved" up to its stop, and drops out after.
    """
    steps, censored = _check_times(steps, censored)
    sf = scipy.stats.ecdf(_censored_data(steps, censored)).sf
    s = np.asarray(sf.probabilities, dtype=float)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        band = sf.confidence_interval(CONFIDENCE, method="log-log")
        low, high = (np.asarray(band.low.probabilities, float), np.asarray(band.high.probabilities, float))
    # the log-log band is undefined where S is exactly 1 (before any solve) or 0 (all
    # solved): the Greenwood variance is 0 there, so the band collapses onto S
    low, high = np.where(np.isnan(low), s, low), np.where(np.isnan(high), s, high)
    return KaplanMeier(np.asarray(sf.quantiles, float), s, low, high, steps.size, int((~censored).sum()))


def _first_at_or_below_half(times: np.ndarray, s: np.ndarray) -> float:
    hit = np.flatnonzero(s <= 0.5 + 1e-9)  # tolerance: a product of fractions may round above 0.5
    return float(times[hit[0]]) if hit.size else math.inf


def km_median(steps, censored) -> tuple[float, float, float]:
    """Median time to solve with its 95 % interval: (median, low, high).

    The median is the first step at which the Kaplan–Meier fraction solved reaches one
    half (S(t) <= 0.5): "by step t, half the runs had solved". For ten uncensored runs
    solving at 100, 200, ..., 1,000 that is 500 (this convention takes the lower of the
    two middle values where a sample median would average them).

    The interval inverts the pointwise 95 % band of S (the Brookmeyer–Crowley
    construction): low is the first step where the band's lower edge reaches 1/2, high
    the first where its upper edge does.

    When fewer than half the runs ever solve (S never reaches 1/2: e.g. more than half
    censored at the cap), the median is undefined and returned as `inf`, meaning "later
    than anything observed"; an undefined interval end is `inf` too.
    """
    est = km(steps, censored)
    return (_first_at_or_below_half(est.times, est.survival),
            _first_at_or_below_half(est.times, est.low),
            _first_at_or_below_half(est.times, est.high))


def km_curve(steps, censored, until: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan–Meier curve for plotting: (step, fraction solved by that step), 1 − S.

    Starts at (0, 0) and holds each value until the next step, for
    `plt.step(x, y, where="post")`; `until` (e.g. the step cap) extends the last value to
    the right edge of the plot.
    """
    est = km(steps, censored)
    x = np.concatenate([[0.0], est.times])
    y = np.concatenate([[0.0], 1.0 - est.survival])
    if until is not None and until > x[-1]:
        x, y = np.append(x, float(until)), np.append(y, y[-1])
    return x, y


def _km_median_rows(steps: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """Kaplan–Meier medians of many samples at once (one sample per row), for the bootstrap.

    The same estimate as `km_median`'s point (a test checks they agree) without scipy's
    per-call overhead: sort each row by step, a solve before a censoring at the same step
    (a run censored at t was still watched at t); S is the running product of
    (1 - solved / at risk); the median is the first step with S <= 1/2, else inf.
    """
    steps, censored = np.atleast_2d(steps).astype(float), np.atleast_2d(censored).astype(bool)
    order = np.lexsort((censored, steps), axis=-1)
    t = np.take_along_axis(steps, order, axis=-1)
    event = ~np.take_along_axis(censored, order, axis=-1)
    n = steps.shape[-1]
    s = np.cumprod(1.0 - event / (n - np.arange(n)), axis=-1)
    below = s <= 0.5 + 1e-9
    first = np.argmax(below, axis=-1)
    return np.where(below.any(axis=-1), t[np.arange(t.shape[0]), first], np.inf)


def _median_ratio(control: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """control / reference of medians that may be inf (never reached one half).

    finite / finite is the ratio; inf / finite = inf (the control does not get there);
    finite / inf = 0; inf / inf is undefined (NaN).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isinf(control) & np.isinf(reference), np.nan, control / reference)


def median_ratio_ci(steps_c, cens_c, steps_r, cens_r, seed: int = 0,
                    n_resamples: int = 2000) -> tuple[float, float, float]:
    """Ratio of Kaplan–Meier medians control / reference with a paired bootstrap 95 % interval.

    The seed pairs are resampled together (both rows of a seed share initialisation and
    data), the two medians recomputed, and the 2.5 % and 97.5 % percentiles of the ratio
    taken. A ratio below 1 means the control solves faster. Undefined medians follow
    `_median_ratio`; a resample whose ratio is undefined (neither reached one half) could
    be anything, so it counts as 0 for the lower end and inf for the upper end
    (conservative: it can only widen the interval). Returns (ratio, low, high).
    """
    sc, cc = _check_times(steps_c, cens_c)
    sr, cr = _check_times(steps_r, cens_r)
    if sc.size != sr.size:
        raise ValueError("the bootstrap resamples seed pairs: both rows need the same seeds")
    point = float(_median_ratio(np.array(km_median(sc, cc)[0]), np.array(km_median(sr, cr)[0])))
    idx = np.random.default_rng(seed).integers(0, sc.size, size=(n_resamples, sc.size))
    ratio = _median_ratio(_km_median_rows(sc[idx], cc[idx]), _km_median_rows(sr[idx], cr[idx]))
    tail = (1 - CONFIDENCE) / 2
    low = np.quantile(np.where(np.isnan(ratio), 0.0, ratio), tail, method="inverted_cdf")
    high = np.quantile(np.where(np.isnan(ratio), np.inf, ratio), 1 - tail, method="inverted_cdf")
    return point, float(low), float(high)


def logrank_test(steps_a, cens_a, steps_b, cens_b) -> tuple[float, float]:
    """Two-sided log-rank test of time to solve, group a against group b: (z, p).

    At every step where some run solves, the log-rank test compares how many of each
    group solved with how many were expected from the runs still unsolved in each group,
    and sums over steps. It uses every solve time and every censored run up to its stop,
    and is valid, if conservative, when the groups are paired by seed (it ignores the
    pairing). z > 0: group a solves sooner than expected, i.e. faster than b.

    If no run in either group ever solved there is nothing to test: (0.0, 1.0). The same
    when the statistic has no variance (every run at risk solved at one and the same step,
    e.g. all runs of both groups at 900): the data cannot tell the groups apart.
    """
    sa, ca = _check_times(steps_a, cens_a)
    sb, cb = _check_times(steps_b, cens_b)
    if ca.all() and cb.all():
        return 0.0, 1.0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        res = scipy.stats.logrank(_censored_data(sa, ca), _censored_data(sb, cb), alternative="two-sided")
    if not np.isfinite(res.pvalue):
        return 0.0, 1.0
    return float(res.statistic), float(res.pvalue)


def logrank(steps_a, cens_a, steps_b, cens_b) -> float:
    """Two-sided log-rank p of time to solve (see `logrank_test`); 1.0 when nobody solved."""
    return logrank_test(steps_a, cens_a, steps_b, cens_b)[1]


def min_logrank_p(n_a: int, n_b: int) -> float:
    """The log-rank p of the most separated samples of these sizes.

    One group solves at distinct steps 1, 2, ..., the other is censored after the last
    of them (either way round; the smaller p is kept). Data cannot be more one-sided, so
    when even this p cannot pass the level the test could not decide the comparison.
    With 10 against 10 it is ~3e-6; with 2 against 2 ~0.09.
    """
    if n_a < 1 or n_b < 1:
        return 1.0

    def separated(n_fast, n_slow):
        fast = np.arange(1.0, n_fast + 1)
        return logrank(fast, np.zeros(n_fast, bool), np.full(n_slow, n_fast + 1.0), np.ones(n_slow, bool))

    return min(separated(n_a, n_b), separated(n_b, n_a))


def paired_sign_test_censored(steps_a, cens_a, steps_b, cens_b) -> tuple[int, int, int, float]:
    """Which run of each seed solved first, where censoring lets us tell; exact sign test.

    Per seed: both solved → the earlier step (a tie says nothing); a solved at s and b
    censored at c >= s → a first (b had not solved when a did), and the same the other
    way; a solved only after b's censoring time, or both censored → undecidable. The
    undecidable seeds are dropped and the others tested with the exact two-sided binomial
    test against 1/2. Returns (n_a_first, n_b_first, n_informative, p); p = 1.0 when no
    seed is informative.
    """
    sa, ca = _check_times(steps_a, cens_a)
    sb, cb = _check_times(steps_b, cens_b)
    if sa.size != sb.size:
        raise ValueError("the sign test pairs runs by seed: both groups need the same length")
    both = ~ca & ~cb
    a_first = (both & (sa < sb)) | (~ca & cb & (sa <= sb))
    b_first = (both & (sb < sa)) | (~cb & ca & (sb <= sa))
    k_a, k_b = int(a_first.sum()), int(b_first.sum())
    n = k_a + k_b
    p = 1.0 if n == 0 else float(scipy.stats.binomtest(k_a, n, 0.5, alternative="two-sided").pvalue)
    return k_a, k_b, n, p


# ---------------------------------------------------------------- paired differences

MAX_ENUMERATED_PAIRS = 16
"""Up to this many pairs `sign_flip_test` enumerates the 2^n flips itself (65,536 rows)."""


def sign_flip_test(diffs) -> float:
    """Exact two-sided sign-flip permutation test of the mean paired difference.

    Under "the two rows do not differ", each seed's difference is as likely to have come
    out with the opposite sign. The test takes all 2^n sign patterns (1,024 for 10 seeds)
    and gives p = the fraction whose mean is at least as far from 0 as the observed one.
    Exact (no sampling), no normality assumption, and it keeps the seed pairing. The
    smallest possible p is `min_sign_flip_p(n)`. All-zero differences: p = 1.
    """
    d = np.asarray(diffs, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("no paired differences")
    if not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be finite")
    if np.all(d == 0):
        return 1.0
    observed = abs(d.mean())
    tol = 1e-9 * max(1.0, float(np.abs(d).max()))
    if d.size <= MAX_ENUMERATED_PAIRS:
        signs = 1 - 2 * ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1)
        return float(np.mean(np.abs(signs @ d) / d.size >= observed - tol))
    res = scipy.stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf,
                                       alternative="two-sided")
    return float(res.pvalue)


def bootstrap_ci(diffs, seed: int = 0, n_resamples: int = 9999) -> tuple[float, float]:
    """Bootstrap 95 % interval of the mean paired difference: (low, high).

    `scipy.stats.bootstrap` (BCa, which corrects the percentile interval for bias and
    skew; percentile if BCa is undefined for these data) with a fixed generator, so the
    interval is the same on every run. Constant differences give (d, d): every resample
    has the same mean.
    """
    d = np.asarray(diffs, dtype=float).ravel()
    if d.size == 0:
        return math.nan, math.nan
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0])
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            res = scipy.stats.bootstrap((d,), np.mean, n_resamples=n_resamples, confidence_level=CONFIDENCE,
                                        method=method, rng=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return low, high
    return math.nan, math.nan


# ---------------------------------------------------------------- multiplicity

def holm(pvalues) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (step-down), in the input order.

    Sort the m p-values; the i-th smallest (i = 1..m) is multiplied by m − i + 1, a
    running maximum keeps the adjusted values monotone, and they are capped at 1.
    Rejecting where the adjusted p < 0.05 controls the chance of any false "decided" in
    the family at 5 %, for any dependence between the tests, and is uniformly more
    powerful than plain Bonferroni. NaN (a comparison with no test) passes through and
    does not count in m.
    """
    def adjusted(ranked: np.ndarray) -> np.ndarray:
        m = len(ranked)
        return np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * ranked))

    return _by_rank(pvalues, adjusted)


def _by_rank(pvalues, per_rank) -> np.ndarray:
    """Apply `per_rank` to the p-values sorted ascending (NaN left out) and return its
    values in the input order, NaN where the input was NaN."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    order = np.argsort(p[ok], kind="stable")
    sub = np.empty(int(ok.sum()))
    sub[order] = per_rank(p[ok][order])
    out[ok] = sub
    return out


# ---------------------------------------------------------------- exact paired tests on integers

def sign_flip_tails(values) -> tuple[float, float]:
    """Exact one-sided sign-flip p-values of the sum of paired differences given as integers:
    (P(S* >= S), P(S* <= S)), S the observed sum, S* the sum with every seed's sign flipped
    at random (all 2^n patterns, counted, not sampled).

    Integers make the count exact for any n: the distribution of S* is built one seed at a
    time (each seed moves the sum by +|v| or -|v|), an array as long as 2 * sum|v| + 1, so
    40 seeds cost 40 shifted additions. Float64 counts stay exact up to 2^53 patterns.
    Seeds with a zero difference count in both numerator and denominator, so they change
    nothing. Differences measured in other units are scaled to integers first (accuracy
    in items of 200, a log ratio in hundredths).
    """
    v = np.asarray(values)
    if v.size == 0:
        raise ValueError("no paired differences")
    if not np.issubdtype(v.dtype, np.integer):
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise ValueError("sign_flip_tails takes integer differences; scale them first")
        v = v.astype(np.int64)
    a = np.abs(v.astype(np.int64))
    if a.sum() > 5_000_000:
        raise ValueError(f"differences too large for exact counting (sum |v| = {a.sum()}); use coarser units")
    total = int(a.sum())
    counts = np.zeros(2 * total + 1)
    counts[total] = 1.0  # index = S* + total
    for ai in a[a > 0]:
        shifted = np.zeros_like(counts)
        shifted[ai:] += counts[:-ai]
        shifted[:-ai] += counts[ai:]
        counts = shifted
    observed = int(v.sum()) + total
    n_patterns = counts.sum()
    return float(counts[observed:].sum() / n_patterns), float(counts[:observed + 1].sum() / n_patterns)


def wilson_interval(successes: float, n: int, level: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion; `successes` may be fractional (ties counted half)."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    z = float(scipy.stats.norm.isf((1 - level) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def seeds_for_power(mean: float, sd: float, level: float, power: float = 0.8) -> float:
    """Seeds per arm a paired two-sided test at `level` needs for `power` at this effect:
    ((z_(1-level/2) + z_power) * sd / mean)^2, rounded up (the normal approximation, which
    the exact test roughly follows from about ten seeds on). NaN when nothing was observed
    (mean 0) or the differences do not vary (sd 0)."""
    if not (np.isfinite(mean) and np.isfinite(sd)) or mean == 0 or sd == 0:
        return math.nan
    z = scipy.stats.norm.isf(level / 2) + scipy.stats.norm.ppf(power)
    return float(math.ceil((z * sd / abs(mean)) ** 2))


def holm_levels(pvalues, alpha: float = ALPHA) -> np.ndarray:
    """The level at which Holm's step-down procedure tests each p-value, in the input order.

    Sorted, the k-th smallest p is tested at alpha / (m − k + 1) while the procedure keeps
    rejecting; from the first p it does not reject (rank j) on, every later one is held to
    the level that stopped it, alpha / (m − j + 1). So p <= level exactly when Holm rejects,
    and an interval at 1 − level excludes the null exactly then. NaN stays NaN, not counted.
    """
    def levels(ranked: np.ndarray) -> np.ndarray:
        m = len(ranked)
        steps = alpha / (m - np.arange(m))
        failed = np.nonzero(ranked > steps)[0]
        j = int(failed[0]) if failed.size else m
        return np.where(np.arange(m) < j, steps, steps[min(j, m - 1)])

    return _by_rank(pvalues, levels)


def tost_power(margin: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of two one-sided tests at `alpha` each to show equivalence within ±`margin`
    when the true difference is 0 and the paired differences have standard deviation `sd`
    over `n` seeds (the normal approximation): 2 Φ(margin √n / sd − z_(1−alpha)) − 1, or 0."""
    z = margin * math.sqrt(n) / sd - scipy.stats.norm.isf(alpha)
    return max(0.0, 2 * float(scipy.stats.norm.cdf(z)) - 1)
