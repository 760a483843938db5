"""Seeds added where they can decide: a two-stage design, fixed before the added runs.

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
the level each). Shifts are searched on the integer grid of the differences, within the
range the endpoint can take, so no end is infinite.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.stats

from .stats import sign_flip_tails

FIRST_SEEDS = tuple(range(10))
ADDED_SEEDS = tuple(range(10, 40))
MAX_SEEDS = len(FIRST_SEEDS) + len(ADDED_SEEDS)
W1 = math.sqrt(len(FIRST_SEEDS) / MAX_SEEDS)
W2 = math.sqrt(len(ADDED_SEEDS) / MAX_SEEDS)
ALPHA_FIRST = 0.005
"""Two-sided p on the first ten seeds at or below which a comparison stops, decided."""
C1 = float(scipy.stats.norm.isf(ALPHA_FIRST / 2))
"""The stage-1 boundary on |Z1|."""

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(96)


def _continued_tail(z: float) -> float:
    """P(|Z1| < c1 and w1 Z1 + w2 Z2 >= z) for independent standard normals (Gauss–Legendre
    on (−c1, c1); 96 nodes are exact to ~1e-12 here)."""
    x = C1 * _NODES
    inner = scipy.stats.norm.sf((z - W1 * x) / W2)
    return float(C1 * np.sum(_WEIGHTS * scipy.stats.norm.pdf(x) * inner))


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
    up1, down1 = sign_flip_tails(first)
    if added is None or len(added) == 0 or two_sided(up1, down1) <= ALPHA_FIRST:
        return up1, down1
    up2, down2 = sign_flip_tails(added)
    early = float(scipy.stats.norm.sf(C1))
    tails = []
    for p1, p2 in ((up1, up2), (down1, down2)):
        z = W1 * scipy.stats.norm.isf(p1) + W2 * scipy.stats.norm.isf(p2)
        tails.append(min(1.0, early + _continued_tail(z)))
    return tails[0], tails[1]


def p_value(first, added=None) -> float:
    """Two-sided p of the design for "no difference"."""
    return two_sided(*stagewise_tails(first, added))


def _shifted(x, k: int):
    return None if x is None else np.asarray(x, dtype=np.int64) - k


def interval(first, added, level: float, bounds: tuple[int, int]) -> tuple[int, int]:
    """The shifts (integers, in the differences' unit) that the design does not reject at
    `level` (two-sided): [lowest k with P(above | shift k) > level/2, highest k with
    P(below | shift k) > level/2], searched by bisection within `bounds`, the range the
    mean difference can take. Both tails are monotone in the shift for the sum statistic,
    which the tests check on the study's data."""
    lo_b, hi_b = bounds

    def up(k):
        return stagewise_tails(_shifted(first, k), _shifted(added, k))[0] > level / 2

    def down(k):
        return stagewise_tails(_shifted(first, k), _shifted(added, k))[1] > level / 2

    lo = lo_b if up(lo_b) else _first_true(up, lo_b, hi_b)
    hi = hi_b if down(hi_b) else _last_true(down, lo_b, hi_b)
    return lo, hi


def estimate(first, added, bounds: tuple[int, int], interval_: tuple[int, int]) -> float:
    """The median-unbiased estimate of the shift: where the design's two one-sided tails
    balance (the shift every interval of the same test is centred on, so it lies inside
    each of them; a plain mean of skewed, two-stage differences need not). On the integer
    grid that is between the last shift with P(above) < P(below) and the next one, so the
    estimate is their midpoint, kept within `interval_`."""
    lo_b, hi_b = bounds

    def balanced(k):
        up, down = stagewise_tails(_shifted(first, k), _shifted(added, k))
        return up >= down

    k1 = lo_b if balanced(lo_b) else _first_true(balanced, lo_b, hi_b)
    return float(min(max(k1 - 0.5, interval_[0]), interval_[1]))


def _first_true(f, a: int, b: int) -> int:
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
    return _first_true(lambda k: not f(k), a, b) - 1


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
    lo, hi = interval(first, None, ALPHA_FIRST, (-span, span))
    if margin[0] < lo and hi < margin[1]:
        return False, "equivalent on the first 10 seeds"
    return True, f"undecided on the first 10 seeds: {len(ADDED_SEEDS)} seeds added"
