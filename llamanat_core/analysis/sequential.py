"""Seeds added where they can decide: a two-stage design, fixed before the added runs.

This module is the analysis as registered (sign flips on the sum); the book decides with
the corrected construction in `llamanat_core.analysis.paired`, which reuses the design's stage-1
rule and its combination (`combine`). Resampling the study's own rows showed these
intervals covering too little after an early stop (`benchmarks/sequential_design.py
--resample`).

Every comparison is a set of paired per-seed differences (control − reference, on one
endpoint, in integer units so the tests below are exact). Stage 1 is the study's first ten
seeds. A comparison that is not at chance and not decided on them gets thirty more seeds
for both of its rows (stage 2), so no row ever has more than forty.

**The combination test.** Each stage is tested on its own seeds with the exact sign-flip
test (`stats.sign_flip_tails`); under "no difference" the two stages' p-values are
independent, whatever was decided after stage 1. They are combined by the inverse-normal
method with weights fixed in advance by the planned stage sizes,
Z = w1 Φ⁻¹(1 − p1) + w2 Φ⁻¹(1 − p2), w1 = √(10/40), w2 = √(30/40), so choosing which
comparisons continue, having seen stage 1, cannot inflate the error rate.

**Spending the level over two looks.** A comparison may stop with a decision after stage 1
only when its two-sided p on ten seeds is at most `ALPHA_FIRST` (0.005, below the first
Holm step of the largest family, 0.05/7, so an early stop is always a Holm rejection).
Outcomes are then ordered stage-wise — every early stop more extreme than every
continuation — and a continued comparison's one-sided p is
P(Z1 ≥ c1) + P(|Z1| < c1, w1 Z1 + w2 Z2 ≥ z), with c1 the stage-1 boundary and z the
observed combined statistic. That p is valid at every level, so Holm applies to it
unchanged.

**Intervals that agree.** The interval of a comparison is the set of shifts δ that the same
test does not reject at the comparison's level: {δ : two-sided p(d − δ) > level}. It
excludes 0 exactly when the test rejects, and lies inside an equivalence margin exactly
when both one-sided tests against the margin's ends reject (two one-sided tests at half
the level each). Two choices bring how often it covers the true shift close to its
level on data like the study's:

- *The branch is the one the data took.* A comparison that stopped early is tested at
  every shift on stage 1 alone; a continued one, at every shift, by the combination p
  (the chance of an early stop plus the continued tail at the shifted combined
  statistic), without asking whether the *shifted* stage-1 data would have stopped. The
  stopping rule was applied once, to the real differences; re-applying it to each shifted
  copy rejects every shift at which ten seeds alone look extreme, which, with skewed
  differences, excludes the true shift more often than the level allows. At shift 0
  both readings are the test itself, so every verdict read off the interval agrees with p.
- *Ends to a tenth of a unit* (`GRID`). The differences are integers, but the true mean
  difference is not: ends on the integer grid stop up to a unit short of where the test
  starts to reject. Differences are scaled by `GRID` so the sign-flip counts stay exact.

Shifts are searched within the range the endpoint can take, so no end is infinite. The
interval is not guaranteed to cover at its level for every true effect: the stopped
branch spends its whole level on stage 1 alone, so for effects at which an early stop is
likely the two branches together can miss somewhat more often than the level (the design
benchmark, `benchmarks/sequential_design.py`, measures it on data like the study's).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special
import scipy.stats

from .stats import sign_flip_tails

FIRST_SEEDS = tuple(range(10))
ADDED_SEEDS = tuple(range(10, 40))
MAX_SEEDS = len(FIRST_SEEDS) + len(ADDED_SEEDS)
W1 = math.sqrt(len(FIRST_SEEDS) / MAX_SEEDS)
W2 = math.sqrt(len(ADDED_SEEDS) / MAX_SEEDS)
GRID = 10
"""Interval ends and the estimate are found to 1/GRID of the differences' unit."""
ALPHA_FIRST = 0.005
"""Two-sided p on the first ten seeds at or below which a comparison stops, decided."""
C1 = float(scipy.stats.norm.isf(ALPHA_FIRST / 2))
"""The stage-1 boundary on |Z1|."""

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(96)
_X = C1 * _NODES
_DENSITY = _WEIGHTS * scipy.stats.norm.pdf(_X)
_EARLY = float(scipy.stats.norm.sf(C1))
"""P(Z1 >= c1): the chance of an early stop in one direction."""


def _continued_tail(z: float) -> float:
    """P(|Z1| < c1 and w1 Z1 + w2 Z2 >= z) for independent standard normals (Gauss–Legendre
    on (−c1, c1); 96 nodes are exact to ~1e-12 here). ndtr(−x) is norm.sf(x), without
    scipy.stats' argument checks: the interval search calls this thousands of times."""
    inner = scipy.special.ndtr(-((z - W1 * _X) / W2))
    return float(C1 * np.sum(_DENSITY * inner))


def two_sided(p_up: float, p_down: float) -> float:
    return min(1.0, 2.0 * min(p_up, p_down))


def stops_early(first) -> bool:
    """Does stage 1 decide on its own (two-sided p <= ALPHA_FIRST)?"""
    return two_sided(*sign_flip_tails(first)) <= ALPHA_FIRST


def stagewise_tails(first, added=None) -> tuple[float, float]:
    """One-sided p-values (control above, control below) of the two-stage design.

    `first` and `added` are the integer differences of the two stages (`added` None or
    empty when the comparison stopped after stage 1). A comparison that stops early, or
    has no added seeds, is tested on stage 1 alone; otherwise the stages are combined and
    ordered stage-wise (see the module's docstring).
    """
    if _on_stage_one(first, added):
        return sign_flip_tails(first)
    return _combined_tails(first, added)


def _on_stage_one(first, added) -> bool:
    return added is None or len(added) == 0 or stops_early(first)


def combine(p1: float, p2: float) -> float:
    """A continued comparison's one-sided p from its two stages' one-sided p-values (same
    direction): P(early stop that way) + the continued tail at the combined statistic."""
    z = W1 * -scipy.special.ndtri(p1) + W2 * -scipy.special.ndtri(p2)  # norm.isf
    return min(1.0, _EARLY + _continued_tail(z))


def _combined_tails(first, added) -> tuple[float, float]:
    """The continued comparison's one-sided p-values, each stage by exact sign flips."""
    up1, down1 = sign_flip_tails(first)
    up2, down2 = sign_flip_tails(added)
    return combine(up1, up2), combine(down1, down2)


def p_value(first, added=None) -> float:
    """Two-sided p of the design for "no difference"."""
    return two_sided(*stagewise_tails(first, added))


def _tails_by_step(first, added, grid: int):
    """The design's one-sided p-values as a function of the shift in steps of 1/grid, on the
    branch the unshifted data took (stage 1 alone, or combined: the module's docstring)."""
    stage_one = _on_stage_one(first, added)
    first = np.asarray(first, dtype=np.int64) * grid
    if stage_one:
        return lambda step: sign_flip_tails(first - step)
    added = np.asarray(added, dtype=np.int64) * grid
    return lambda step: _combined_tails(first - step, added - step)


def shifted_tails(first, added, shift: float, grid: int = GRID) -> tuple[float, float]:
    """One-sided p-values (control above, control below) for "the mean difference is
    `shift`", the test the interval inverts; `shift` a multiple of 1/grid. At shift 0 they
    are `stagewise_tails(first, added)`."""
    step = round(shift * grid)
    if not math.isclose(step, shift * grid, abs_tol=1e-9):
        raise ValueError(f"shift {shift} is not a multiple of 1/{grid}")
    return _tails_by_step(first, added, grid)(step)


def p_curve(first, added, interval_: tuple[float, float], pad: int = 600,
            grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """The test turned around, drawn: the two-sided p of the shifted differences at every
    shift on the 1/grid grid from `pad` steps below the interval's lower end to `pad` above
    its upper end. Returns (shifts, p-values); p stays above the level exactly inside the
    interval."""
    lo, hi = interval_
    step = 1 / grid
    shifts = np.arange(round(lo / step) - pad, round(hi / step) + pad + 1) * step
    return shifts, np.array([two_sided(*shifted_tails(first, added, k, grid)) for k in shifts])


def interval(first, added, level: float, bounds: tuple[int, int],
             grid: int = GRID) -> tuple[float, float]:
    """The shifts (in the differences' unit, to 1/grid) that the design does not reject at
    `level` (two-sided): [lowest shift with P(above) > level/2, highest with
    P(below) > level/2], searched by bisection within `bounds`, the range the mean
    difference can take. Both tails are monotone in the shift (each stage's tail is, and
    the combination is monotone in each), which the tests check."""
    return invert(_tails_by_step(first, added, grid), level, bounds, grid)


def invert(tails, level: float, bounds: tuple[int, int], grid: int) -> tuple[float, float]:
    """The steps k (in 1/grid of a unit, within `bounds` units) at which `tails(k)`, the
    one-sided p-values (above, below) of "the shift is k / grid", both exceed level / 2;
    the tails monotone in k, so each end is found by bisection."""
    lo_b, hi_b = bounds[0] * grid, bounds[1] * grid

    def up(k):
        return tails(k)[0] > level / 2

    def down(k):
        return tails(k)[1] > level / 2

    lo = lo_b if up(lo_b) else first_true(up, lo_b, hi_b)
    hi = hi_b if down(hi_b) else _last_true(down, lo_b, hi_b)
    return lo / grid, hi / grid


def estimate(first, added, bounds: tuple[int, int], interval_: tuple[float, float],
             grid: int = GRID) -> float:
    """The median-unbiased estimate of the shift: where the one-sided tails that `interval`
    inverts balance (the shift every interval of the same test is centred on, so it lies
    inside each of them; a plain mean of skewed, two-stage differences need not). On the
    grid that is the first shift with P(above) = P(below) if there is one, else between the
    last shift with P(above) < P(below) and the next one, so their midpoint; kept within
    `interval_`."""
    tails = _tails_by_step(first, added, grid)
    lo_b, hi_b = bounds[0] * grid, bounds[1] * grid

    def balanced(k):
        up, down = tails(k)
        return up >= down

    k1 = lo_b if balanced(lo_b) else first_true(balanced, lo_b, hi_b)
    up, down = tails(k1)
    centre = k1 / grid if up == down else (k1 - 0.5) / grid
    return float(min(max(centre, interval_[0]), interval_[1]))


def first_true(f, a: int, b: int) -> int:
    """Smallest k in (a, b] with f(k), for f false at a and monotone false→true (b if none)."""
    while b - a > 1:
        m = (a + b) // 2
        if f(m):
            b = m
        else:
            a = m
    return b


def _last_true(f, a: int, b: int) -> int:
    """Largest k in [a, b) with f(k), for f true→false and false at b (a if none)."""
    return first_true(lambda k: not f(k), a, b) - 1


def continues(first, *, both_at_chance: bool, margin: tuple[int, int]) -> tuple[bool, str]:
    """The stage-1 rule: does this comparison get the added seeds, and why (or why not)?

    Not when both rows are at chance (nothing to compare), when stage 1 decides (two-sided
    p <= ALPHA_FIRST), or when stage 1 already shows equivalence at that level (its
    interval at ALPHA_FIRST lies inside the margin). Everything else continues.
    """
    if both_at_chance:
        return False, "both at chance"
    if stops_early(first):
        return False, "decided on the first 10 seeds"
    span = max(abs(int(np.min(first))), abs(int(np.max(first)))) + 1
    # the rule as fixed before the added seeds ran: whole units
    lo, hi = interval(first, None, ALPHA_FIRST, (-span, span), grid=1)
    if margin[0] < lo and hi < margin[1]:
        return False, "equivalent on the first 10 seeds"
    return True, f"undecided on the first 10 seeds: {len(ADDED_SEEDS)} seeds added"
