"""The corrected construction: the two-stage design decided on the median seed, by sign tests.

The registered analysis (`llamanat_core.analysis.sequential`) tests the sum of the paired
differences by exact sign flips. That test's null is that the differences are symmetric
about zero, and its interval, inverted over shifts, is for the centre of symmetry: when
the differences are skewed (most pairs near 0, a few one large lump), the mean can be zero
while ten seeds still look one-sided, and the interval misses the mean more often than it
says. Resampling the study's own per-seed differences shows it
(`benchmarks/sequential_design.py --resample`).

Here the estimand is the **median paired difference**: the difference on the typical
seed. Its test, the sign test, needs no symmetry and no continuous data. For "the median
is θ" it counts the pairs above θ and the pairs below θ; under that null each count is at
most Binomial(n, 1/2) whatever the shape of the differences (a pair exactly at θ is
counted in n but in neither tail, so ties only make the test cautious). So

    P(above) = P(Binomial(n, 1/2) >= #{d > θ}),   P(below) = P(Binomial(n, 1/2) >= #{d < θ}).

**Two stages** are combined exactly as the registered design combines them (the
inverse-normal weights and the stage-wise ordering of `sequential.combine`): the sign
test's p-values are at least uniform under the null, so the combination stays valid.
A comparison that stopped after ten seeds is judged on them alone at `ALPHA_FIRST`, the
level an early stop spends, so early decisions still sit inside the design's budget.

**The interval** is the set of θ neither test rejects at the level. Both tails only
change at a data value and are monotone in θ, so its ends are data values (no grid is
needed) found by bisection over the sorted differences; on ten seeds at 0.005 it is
[smallest, largest]. **The estimate** is the median of the differences used, kept inside
the interval.

`decide_paired` is the whole construction for any paired study: float differences read on
a stated grid (`unit`: differences under half a unit are ties), a margin, a level, one or
two stages. `first_look` is the stage-1 rule for a study planned with it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.stats

from . import sequential

ALPHA_FIRST = sequential.ALPHA_FIRST
FIRST_SEEDS = len(sequential.FIRST_SEEDS)


def on_grid(differences, unit: float) -> np.ndarray:
    """Float differences rounded to multiples of `unit` (what counts as a tie is stated)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be a non-empty 1-d array of finite numbers")
    if not unit > 0:
        raise ValueError(f"unit must be positive, got {unit}")
    return np.round(d / unit) * unit


def sign_tails(d, theta: float = 0.0) -> tuple[float, float]:
    """One-sided sign-test p-values for "the median difference is θ": (P(above), P(below)),
    each P(Binomial(n, 1/2) >= the count on that side); pairs at θ count in n only."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    above, below = int(np.sum(d > theta)), int(np.sum(d < theta))
    return float(scipy.stats.binom.sf(above - 1, n, 0.5)), float(scipy.stats.binom.sf(below - 1, n, 0.5))


def sign_p_curve(d, pad: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """The sign test turned around, drawn: its two-sided p for "the median difference is θ"
    at every whole θ from `pad` below the smallest difference to `pad` above the largest.
    Returns (shifts, p-values); p is 1 between the two middle differences."""
    d = np.asarray(d)
    theta = np.arange(d.min() - pad, d.max() + pad + 1)
    return theta, np.array([sequential.two_sided(*sign_tails(d, t)) for t in theta])


def tails(first, added, theta: float = 0.0) -> tuple[float, float]:
    """The design's one-sided p-values at θ: stage 1 alone when there are no added seeds,
    else the two stages' sign tests combined and ordered after every early stop."""
    up1, down1 = sign_tails(first, theta)
    if added is None or len(added) == 0:
        return up1, down1
    up2, down2 = sign_tails(added, theta)
    return sequential.combine(up1, up2), sequential.combine(down1, down2)


def interval(first, added, level: float) -> tuple[float, float]:
    """The median differences θ that neither one-sided test rejects at level / 2. The ends
    are data values; ±inf when even the most extreme θ is not rejected (too few pairs)."""
    values = np.unique(np.concatenate([np.asarray(first, float),
                                       np.asarray(added if added is not None else [], float)]))

    def up(i):
        return tails(first, added, values[i])[0] > level / 2

    def down(i):
        return tails(first, added, values[i])[1] > level / 2

    below_all = tails(first, added, values[0] - 1.0)[0] > level / 2
    above_all = tails(first, added, values[-1] + 1.0)[1] > level / 2
    n = len(values)  # bisection over the sorted values; index -1 stands below them all
    lo = -math.inf if below_all else values[sequential.first_true(up, -1, n)]
    hi = math.inf if above_all else values[sequential.first_true(lambda i: not down(i), -1, n) - 1]
    return float(lo), float(hi)


def p_value(first, added=None, stopped_early: bool = False) -> float:
    """Two-sided p of the design for "the median difference is 0". An early stop counts only
    where stage 1 alone is at or below `ALPHA_FIRST` (the region the design pays for); one
    the sign test does not find that extreme ranks below every continuation: p = 1."""
    p = sequential.two_sided(*tails(first, added))
    return 1.0 if stopped_early and p > ALPHA_FIRST else p


def estimate(first, added, interval_: tuple[float, float]) -> float:
    """The median of the differences used, kept inside the interval."""
    d = np.concatenate([np.asarray(first, float), np.asarray(added if added is not None else [], float)])
    return float(min(max(float(np.median(d)), interval_[0]), interval_[1]))


def read_interval(lo: float, hi: float, margin: float) -> str:
    """What an interval of the difference control − reference says: `higher` or `lower`
    when it excludes no difference, `equivalent` when it lies inside ±margin, else
    `undecided`."""
    if lo > 0 or hi < 0:
        return "higher" if lo > 0 else "lower"
    if -margin < lo and hi < margin:
        return "equivalent"
    return "undecided"


@dataclass(frozen=True)
class PairedDecision:
    """One paired comparison decided: the median difference, its interval and p, the
    verdict (`higher`, `lower` for the control's differences; `equivalent`; `undecided`)."""
    n: int
    estimate: float
    low: float
    high: float
    p: float
    level: float
    verdict: str
    stage: str


def decide_paired(first, added=None, *, unit: float, margin: float, level: float = 0.05,
                  two_stage: bool = True) -> PairedDecision:
    """Decide one paired comparison (differences control − reference, in any unit, floats
    welcome) on the median seed. `first`: the first ten seeds' differences; `added`: the
    added seeds' when stage 1 sent it on (None when it stopped). Differences are read on
    the grid `unit`; `margin` is the equivalence margin (±margin) in the same unit; `level`
    the comparison's level (its Holm level in a family). In a two-stage design a comparison
    that stopped after stage 1 is judged at `min(level, ALPHA_FIRST)`, the level its early
    stop spent; `two_stage=False` is a plain one-stage test of `first` at `level`.

        >>> decide_paired(nats_first, unit=0.001, margin=0.02).verdict
    """
    first = on_grid(first, unit)
    added = None if added is None or len(added) == 0 else on_grid(added, unit)
    stopped_early = two_stage and added is None
    used = min(level, ALPHA_FIRST) if stopped_early else level
    lo, hi = interval(first, added, used)
    centre = estimate(first, added, (lo, hi))
    verdict = read_interval(lo, hi, margin)
    n = len(first) + (0 if added is None else len(added))
    return PairedDecision(n, centre, lo, hi, p_value(first, added, stopped_early), used, verdict,
                          "two stages" if added is not None else "first stage")


def first_look(first, *, unit: float, margin: float) -> str:
    """The stage-1 rule of a study planned with this construction: `decided` when the sign
    test on the first ten seeds is at or below `ALPHA_FIRST`, `equivalent` when their
    interval at that level lies inside ±margin, else `continue` (add seeds)."""
    verdict = decide_paired(first, None, unit=unit, margin=margin, level=ALPHA_FIRST).verdict
    return {"higher": "decided", "lower": "decided", "equivalent": "equivalent"}.get(verdict, "continue")
