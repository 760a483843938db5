"""Statistics on plain arrays: chance floors, paired sign-flip tests, multiplicity,
intervals and power.

Every function here is small, takes numbers (not the study), and names the test it
runs. Nothing here trains, plots or reads files: numpy and scipy only. Which rows are
compared, and the verdict each comparison gets, live in `llamanat_core.analysis.comparisons`.

- **chance**: the floor of guessing per task and length, and the count of 200 items a
  guesser stays under (an exact binomial quantile);
- **paired differences**: the exact sign-flip test's tails (`sign_flip_tails`, which
  `llamanat_core.analysis.sequential` combines over two stages) and the smallest p it can give
  (`min_sign_flip_p`);
- **multiplicity**: Holm–Bonferroni adjusted p-values and per-row levels, and
  Benjamini–Hochberg's over the whole study;
- **the paired t and two stages**: the paired t-test's one-sided tails (`paired_t_tails`)
  and the stage-wise combination of any two stages' one-sided p-values at any planned
  stage sizes (`two_stage_tail`; `sequential.combine` is its 10/40 case);
- **intervals and power**: the Wilson interval of a proportion, the seeds a paired
  comparison needs for 80 % power, and the power of an equivalence test.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special
import scipy.stats

ALPHA = 0.05
"""Family-wise level of every verdict (after Holm)."""

CONFIDENCE = 0.95
"""Level of every interval reported."""

N_ITEMS = 200
"""Validation and test sets have 200 items each."""

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


@functools.lru_cache(maxsize=64)  # a binomial quantile, asked for thousands of times per decision
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


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values, step-up), in the input order.

    Sort the m p-values; the i-th smallest becomes p · m / i, a running minimum from the
    largest down keeps them monotone, capped at 1. Rejecting where q <= 0.05 keeps the
    expected share of false decisions among all decisions at 5 % (for independent or
    positively dependent tests): a statement about the whole study, where Holm's is about
    any false decision within a family. NaN passes through and does not count in m.
    """
    def adjusted(ranked: np.ndarray) -> np.ndarray:
        m = len(ranked)
        q = ranked * m / np.arange(1, m + 1)
        return np.minimum(1.0, np.minimum.accumulate(q[::-1])[::-1])

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
    counts = np.ones(1)  # the distribution of the partial sum, from its lowest value up
    for ai in np.sort(a[a > 0]):  # each seed widens it by |v| either side; smallest first, so
        # the early arrays are short (the counts are whole numbers, so the order changes nothing)
        wider = np.zeros(len(counts) + 2 * ai)
        wider[:len(counts)] += counts
        wider[2 * ai:] += counts
        counts = wider
    observed = int(v.sum()) + total  # index = S* + total
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


# ---------------------------------------------------------------- the paired t-test and two stages

def paired_t_tails(d, theta: float = 0.0) -> tuple[float, float]:
    """One-sided paired t-test p-values for "the mean difference is θ": (P(T >= t), P(T <= t))
    with T ~ Student t on n − 1 degrees of freedom and t = (mean − θ) / (sd / √n).

    Exact when the differences are normal; under other shapes the studentized mean is close
    to t from a handful of pairs on, which a resampling check measures rather than assumes.
    Differences that do not vary (sd 0) give t = ±inf (p 0 on the side the mean lies, 1 on
    the other) or, at their value, (1, 1). Needs two pairs.
    """
    d = np.asarray(d, dtype=float)
    if d.ndim != 1 or d.size < 2 or not np.all(np.isfinite(d)):
        raise ValueError("paired_t_tails needs a 1-d array of at least two finite differences")
    n, centre = d.size, float(d.mean()) - theta
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return (1.0, 1.0) if centre == 0 else (0.0, 1.0) if centre > 0 else (1.0, 0.0)
    t = centre / (sd / math.sqrt(n))
    below = float(scipy.special.stdtr(n - 1, t))  # P(T <= t); the fast form of t.cdf
    return 1.0 - below, below


@functools.lru_cache(maxsize=8)
def _stage_one_nodes(alpha_first: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(c1, Gauss–Legendre nodes on (−c1, c1), their weights times the normal density)."""
    c1 = float(scipy.special.ndtri(1.0 - alpha_first / 2))
    nodes, weights = np.polynomial.legendre.leggauss(96)
    return c1, c1 * nodes, c1 * weights * scipy.stats.norm.pdf(c1 * nodes)


def two_stage_tail(p1: float, p2: float, w1: float, alpha_first: float) -> float:
    """The one-sided p of a two-stage design's continued comparison, from its two stages'
    one-sided p-values (same direction), stage-wise ordered: every early stop at two-sided
    level `alpha_first` ranks above every continuation.

    With Z_k = Φ⁻¹(1 − p_k) and weights fixed by the planned stage sizes (w1 = √(n1/n_max),
    w2 = √(1 − w1²)), the combined statistic is z = w1 Z1 + w2 Z2 and
    p = P(Z1 >= c1) + P(|Z1| < c1, w1 Z1 + w2 Z2 >= z), c1 = Φ⁻¹(1 − alpha_first / 2).
    The stages' p-values are independent and at least uniform under the null whatever was
    decided in between, so p is valid at every level (Holm takes it unchanged). The
    integral over Z1 is Gauss–Legendre on (−c1, c1), exact to ~1e-12.
    """
    if not 0 < w1 < 1:
        raise ValueError(f"w1 must lie in (0, 1), got {w1}")
    if not 0 < alpha_first < 1:
        raise ValueError(f"alpha_first must lie in (0, 1), got {alpha_first}")
    w2 = math.sqrt(1.0 - w1 * w1)
    _, x, density = _stage_one_nodes(float(alpha_first))
    z = w1 * -scipy.special.ndtri(p1) + w2 * -scipy.special.ndtri(p2)  # norm.isf, fast
    continued = float(np.sum(density * scipy.special.ndtr(-((z - w1 * x) / w2))))
    return min(1.0, alpha_first / 2 + continued)


# ---------------------------------------------------------------- paired solves and censored times

def mcnemar_exact(only_control: int, only_reference: int) -> float:
    """Exact two-sided McNemar p for paired yes/no outcomes (here: solved within the cap):
    only the discordant pairs count (the control solved and its reference did not, and the
    reverse), and under "each arm as likely to solve" each discordant pair falls either way
    with probability 1/2, so p = min(1, 2 P(Binomial(b + c, 1/2) <= min(b, c))); no
    discordant pair gives 1."""
    b, c = int(only_control), int(only_reference)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    if b + c == 0:
        return 1.0
    return min(1.0, 2.0 * float(scipy.stats.binom.cdf(min(b, c), b + c, 0.5)))


def _times(times, solved) -> tuple[np.ndarray, np.ndarray]:
    t, e = np.asarray(times, dtype=float), np.asarray(solved, dtype=bool)
    if t.ndim != 1 or t.shape != e.shape or t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("times and solved must be non-empty 1-d arrays of one length, times finite")
    return t, e


def kaplan_meier(times, solved):
    """The Kaplan–Meier estimate of P(not solved by step t), a run that never solved being
    right-censored at its last step (not tied there): `scipy.stats.ecdf` on
    `scipy.stats.CensoredData`; returns its survival function (`.quantiles`, `.probabilities`)."""
    t, e = _times(times, solved)
    data = scipy.stats.CensoredData(uncensored=t[e], right=t[~e])
    return scipy.stats.ecdf(data).sf


def restricted_mean(times, solved, cap: float) -> float:
    """The restricted mean time to solve: the area under the Kaplan–Meier curve from 0 to
    `cap`, the expected steps spent unsolved within the cap. It needs no value for a run
    that never solves, only that it was followed to the cap."""
    t, e = _times(times, solved)
    if np.any(t[~e] < cap):
        raise ValueError("a run censored before the cap: the restricted mean needs every run followed to it")
    sf = kaplan_meier(t, e)
    knots = np.concatenate([[0.0], sf.quantiles[sf.quantiles < cap], [cap]])
    heights = np.concatenate([[1.0], sf.probabilities[sf.quantiles < cap]])
    return float(np.sum(heights * np.diff(knots)))


def logrank_z(t_a, e_a, t_b, e_b) -> np.ndarray:
    """The log-rank statistic of arm a against arm b, (O − E) / √V for arm a's solves, for
    one or many assignments at once: each argument (..., n) broadcast, the last axis the
    runs. Positive when arm a solves sooner than its share at risk predicts. Equals
    `scipy.stats.logrank`'s statistic on the same data (tested); written out so a
    permutation can evaluate thousands of relabellings in one pass."""
    t_a, t_b = np.asarray(t_a, float), np.asarray(t_b, float)
    e_a, e_b = np.asarray(e_a, bool), np.asarray(e_b, bool)
    events = np.unique(np.concatenate([t_a[e_a], t_b[e_b]]))
    at_a = (t_a[..., None] >= events).sum(-2)  # (..., events): arm a still unsolved at each time
    at_b = (t_b[..., None] >= events).sum(-2)
    d_a = ((t_a[..., None] == events) & e_a[..., None]).sum(-2)
    d_b = ((t_b[..., None] == events) & e_b[..., None]).sum(-2)
    n, d = at_a + at_b, d_a + d_b
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(n > 0, d * at_a / n, 0.0)
        var = np.where(n > 1, d * (at_a / n) * (1 - at_a / n) * (n - d) / (n - 1), 0.0)
    o_e, v = (d_a - expected).sum(-1), var.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(v > 0, o_e / np.sqrt(np.where(v > 0, v, 1.0)), 0.0)


def _swap_patterns(n: int, draws: int, seed: int) -> np.ndarray:
    """Which pairs swap arms: all 2^n patterns when there are at most 2^14, else `draws`
    random ones (a fixed generator seed, so the same data give the same p)."""
    if n <= 14:
        return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(bool)
    return np.random.default_rng(seed).random((draws, n)) < 0.5


def paired_logrank_tails(t_c, e_c, t_r, e_r, draws: int = 4000, seed: int = 0) -> tuple[float, float]:
    """One-sided p-values (control solves sooner, control solves later) of the log-rank
    statistic with its null distribution from swapping the two runs of a seed (the pairing by
    seed honoured: under "the arm changes nothing" a seed's two runs are exchangeable).
    Exact over every pattern up to 14 pairs, else `draws` random patterns with the observed
    one counted in, so p is never below 1 / (draws + 1)."""
    t_c, e_c = _times(t_c, e_c)
    t_r, e_r = _times(t_r, e_r)
    if t_c.shape != t_r.shape:
        raise ValueError("paired_logrank_tails needs one control and one reference run per seed")
    swap = _swap_patterns(len(t_c), draws, seed)
    z = logrank_z(np.where(swap, t_r, t_c), np.where(swap, e_r, e_c),
                  np.where(swap, t_c, t_r), np.where(swap, e_c, e_r))
    observed = float(logrank_z(t_c, e_c, t_r, e_r))
    extra = 0 if len(t_c) <= 14 else 1  # sampled patterns: count the observed one in
    tol = 1e-12
    up = (np.sum(z >= observed - tol) + extra) / (len(z) + extra)
    down = (np.sum(z <= observed + tol) + extra) / (len(z) + extra)
    return float(up), float(down)


def paired_bootstrap_ratio(x_c, x_r, statistic, level: float, draws: int = 2000,
                           seed: int = 0) -> tuple[float, float, float]:
    """(estimate, low, high) of statistic(control) / statistic(reference), the seed pairs
    resampled together (`draws` times, a fixed generator seed): the percentile interval at
    1 − level of the ratio. `x_c`, `x_r`: (n, k) arrays, one row per seed (a run's columns:
    its time and whether it solved); `statistic` maps (draws, n, k) to (draws,)."""
    x_c, x_r = np.asarray(x_c, float), np.asarray(x_r, float)
    if x_c.shape != x_r.shape or x_c.ndim != 2 or len(x_c) < 2:
        raise ValueError("paired_bootstrap_ratio needs two (n, k) arrays of one shape, n >= 2")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    pick = np.random.default_rng(seed).integers(0, len(x_c), (draws, len(x_c)))
    ratio = statistic(x_c[pick]) / statistic(x_r[pick])
    estimate = float(statistic(x_c[None])[0] / statistic(x_r[None])[0])
    low, high = np.quantile(ratio, [level / 2, 1 - level / 2])
    return estimate, float(low), float(high)


def capped_mean(x: np.ndarray) -> np.ndarray:
    """The restricted mean time to the cap when every run is followed to it: the Kaplan–Meier
    curve is then the share not yet solved, so its area is the mean of min(solve step, cap).
    `x` (..., n, 2): each run's time (its solve step, or the cap) and whether it solved."""
    return x[..., 0].mean(-1)
