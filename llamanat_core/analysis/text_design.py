"""The next text study's analysis, registered before any of its runs exist.

**The study.** Two sizes: `S`, the reference `Config` at the 81-character vocabulary, and
`M`, twice as wide (d_model 128, 8 query heads, 4 key/value heads, d_ff 384; about four
times the parameters). At each size every arm of `ARMS` gets a factor-2 learning-rate
bracket on seeds 0–2 (`LR_SEEDS`), its best rate chosen on the *validation* half
(`loss_val`, the mean over those seeds), so the held-out test half stays untouched by the
choice.

**The questions.** Primary: each arm at its own best rate against the reference at its own
best rate (tuned against tuned), on the test loss at the end of the budget (`loss_end`).
Secondary, tested once on the stage-one seeds: the arm at the reference's best rate (the
common rate) on `loss_end`, and tuned against tuned on `loss_half` (speed), `loss_2x` and
`loss_4x` (longer windows; the learned position table has no rows there).

**The rule.** Each size is a two-stage design (`SIZES`): stage one on seeds 0..n1−1; a
primary comparison whose two-sided p on them is at most `ALPHA_FIRST` stops, decided; one
whose interval at `ALPHA_FIRST` lies inside ±`MARGIN` stops, equivalent; every other one
continues to n_max seeds (both of its arms, `added_arms`). The stages' one-sided p-values
are combined by `stats.two_stage_tail` (inverse-normal weights fixed by the planned
sizes, early stops ordered above every continuation), Holm runs within each family
(`FAMILIES`: size × {matrix controls, rotation bases} × endpoint), and each row's interval
is inverted from the same test at its Holm level (a stopped row at the level its stop
spent, min(level, `ALPHA_FIRST`)). The verdict is read off the interval: `better` or
`worse` when it excludes 0, `equivalent` inside ±`MARGIN`, else `undecided`.

**The margin** is the fourth edition's (`text_comparisons.TEXT_MARGIN`, whose docstring
gives the reason): 0.01 nats per character, the smallest effect the papers report among
these mechanisms, scaled from nats per subword token.

**The test** of each size (`TESTS`) was chosen by `text_design_check`, which resamples every
fourth-edition text row's own per-seed differences, moved to known truths, through this
whole rule (both stages, Holm in families of this study's sizes) for each candidate in
`CANDIDATES`, and keeps the most powerful one that holds at least 93 % coverage and at
most 5 % false decisions in every branch and every branch-by-truth cell of at least
`text_design_check.MIN_CELL` resamples (false decisions as a share of the truth's
resamples). The numbers it rests on are in `artifacts/study/text_design_check.json`
(`choice`, and per size and candidate each branch's and cell's coverage and false
decisions); `text_design_check.choice_table` prints them, and a test holds `TESTS` to the
rule applied to that file. What the file showed when the choice was made, in words: the
mean-based tests (the fourth edition's sign flips, the paired t) are the more powerful,
but after an early stop their intervals cover too little (the stop selects seeds that
overshoot, and at five seeds also seeds whose spread is small), so the rule keeps the sign
test at `S`; at `M` no candidate that holds can stop at stage one (five seeds), and the
sign flips, which cannot, keep the level and decide only large effects after ten seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import paired, sequential, stats
from .text_comparisons import REFERENCE_THETA, TEXT_MARGIN, TEXT_UNIT

MARGIN = TEXT_MARGIN
"""± nats per character inside which two arms are equivalent."""
UNIT = TEXT_UNIT
"""Differences are read on this grid (nats per character); interval ends land on it."""
ALPHA_FIRST = sequential.ALPHA_FIRST
"""Two-sided stage-one level of an early stop: 0.005 = 0.05 / 10, the first Holm step of
the largest family, so an early stop is always a Holm rejection."""
LR_SEEDS = (0, 1, 2)
LR_SCALES = (0.5, 1.0, 2.0)
MATRIX_CONTROLS = ("layernorm", "postnorm", "abs_pos", "gelu_mlp", "mha", "mqa", "bias",
                   "mha_matched", "geglu", "silu_mlp")
BASES = (10.0, 100.0, 1_000_000.0)  # each against the reference's 10,000
REFERENCE = "llama"
PRIMARY = "loss_end"
SECONDARY = ("loss_end at the common rate", "loss_half", "loss_2x", "loss_4x")
ENDPOINTS = (PRIMARY,) + SECONDARY
FAMILIES = ("matrix", "bases")
"""Holm runs within size × family × endpoint."""
COVERAGE_FLOOR = 0.93
FALSE_CEILING = 0.05


@dataclass(frozen=True)
class TwoStage:
    """One size's two-stage plan: stage one on seeds 0..n1−1, at most n_max seeds."""
    n1: int
    n_max: int
    alpha_first: float = ALPHA_FIRST

    def __post_init__(self):
        if not 2 <= self.n1 < self.n_max:
            raise ValueError(f"n1 must be at least 2 and below n_max, got n1={self.n1}, n_max={self.n_max}")

    @property
    def w1(self) -> float:
        """Stage one's inverse-normal weight, fixed by the planned sizes."""
        return math.sqrt(self.n1 / self.n_max)

    @property
    def first_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.n1))

    @property
    def added_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.n1, self.n_max))


SIZES = {"S": TwoStage(10, 40), "M": TwoStage(5, 10)}


# ---------------------------------------------------------------- the candidate tests

def _sign_flip(d, k):
    if k != round(k):
        raise ValueError(f"sign flips shift the differences by whole units, got a shift of {k}")
    return stats.sign_flip_tails(np.asarray(d, dtype=np.int64) - int(k))


def _sign_test(d, k):
    return paired.sign_tails(d, k)


def _paired_t(d, k):
    return stats.paired_t_tails(d, k)


CANDIDATES = {
    "sign_flip_mean": (_sign_flip, "mean"),  # the fourth edition's registered test
    "sign_test_median": (_sign_test, "median"),  # the fourth edition's book
    "paired_t_mean": (_paired_t, "mean"),
}
"""Each candidate's one-stage one-sided tails (differences in whole `UNIT`s, shift k) and
the estimand its interval is for."""

TESTS = {"S": "sign_test_median", "M": "sign_flip_mean"}
"""The registered test of each size (the module's docstring says how each was chosen)."""


def stage_test(test: str):
    if test not in CANDIDATES:
        raise ValueError(f"unknown test {test!r}; choose one of {sorted(CANDIDATES)}")
    return CANDIDATES[test][0]


def tails_at(test: str, first, added, design: TwoStage):
    """k -> the design's one-sided p-values (control above, control below) for "the
    difference is k" (in `UNIT`s): stage one alone when there are no added seeds, else the
    two stages combined (`stats.two_stage_tail`), on the branch the unshifted data took."""
    one = stage_test(test)
    if added is None:
        return lambda k: one(first, k)

    def both(k):
        (u1, d1), (u2, d2) = one(first, k), one(added, k)
        return (stats.two_stage_tail(u1, u2, design.w1, design.alpha_first),
                stats.two_stage_tail(d1, d2, design.w1, design.alpha_first))
    return both


def equivalent(tails, margin: float, level: float) -> bool:
    """Both one-sided tests at the margin's ends reject at level / 2: the interval at
    `level` lies inside (−margin, margin)."""
    return tails(-margin)[0] <= level / 2 and tails(margin)[1] <= level / 2


def judge(tails, margin: float, level: float) -> str:
    """The verdict the interval at `level` gives: `higher`/`lower` (it excludes 0 on that
    side), `equivalent`, `undecided`; read from the tails, so no interval is searched."""
    up, down = tails(0)
    if up <= level / 2:
        return "higher"
    if down <= level / 2:
        return "lower"
    return "equivalent" if equivalent(tails, margin, level) else "undecided"


def covers(tails, truth: float, level: float) -> bool:
    """Does the interval at `level` hold `truth` (neither one-sided test rejects it)?"""
    up, down = tails(truth)
    return up > level / 2 and down > level / 2


def first_look(test: str, first, design: TwoStage, margin: float) -> str:
    """Stage one's rule: `decided` (two-sided p <= alpha_first), `equivalent` (the interval
    at alpha_first inside ±margin) or `continue`."""
    tails = tails_at(test, first, None, design)
    if sequential.two_sided(*tails(0)) <= design.alpha_first:
        return "decided"
    return "equivalent" if equivalent(tails, margin, design.alpha_first) else "continue"


def row_p(test: str, first, added, design: TwoStage, stopped: bool) -> float:
    """Two-sided p for "no difference". A row that stopped at stage one counts only where
    stage one alone reached alpha_first (the region the design pays for); otherwise it
    ranks below every continuation, p = 1. A continued row: the combined p."""
    p = sequential.two_sided(*tails_at(test, first, added, design)(0))
    return 1.0 if stopped and p > design.alpha_first else p


def decide_family(test: str, rows: list, design: TwoStage, margin: float) -> list[dict]:
    """One family of paired rows through the whole rule. `rows`: per row (first, added,
    stopped) in `UNIT`s, `added` None for a row that stopped (or a one-stage row, with
    `stopped` False), or None for a row still waiting for seeds (p 1 in Holm, so the
    family keeps its size; verdict `pending`). Returns per row its p, Holm level, the level
    its interval is read at, its tails (a function of the shift) and verdict."""
    p = np.array([1.0 if r is None else row_p(test, *r[:2], design, r[2]) for r in rows])
    levels = stats.holm_levels(p)
    out = []
    for row, pi, lv in zip(rows, p, levels):
        if row is None:
            out.append({"p": math.nan, "holm_level": float(lv), "level": float(lv), "tails": None,
                        "verdict": "pending"})
            continue
        first, added, stopped = row
        used = min(lv, design.alpha_first) if stopped else lv
        tails = tails_at(test, first, added, design)
        out.append({"p": float(pi), "holm_level": float(lv), "level": float(used), "tails": tails,
                    "verdict": judge(tails, margin, used)})
    return out


def interval_ends(tails, level: float, d: np.ndarray, margin: float) -> tuple[float, float]:
    """The interval's ends in `UNIT`s, by bisection on the grid within a span past every
    difference and the margin; an end the test never reaches there is ±inf."""
    span = int(2 * np.abs(d).max() + 4 * margin) + 2
    lo, hi = sequential.invert(tails, level, (-span, span), 1)
    return (-math.inf if lo <= -span else lo), (math.inf if hi >= span else hi)


# ---------------------------------------------------------------- the study's frame

COLUMNS = ("size", "variant", "rope_theta", "lr_scale", "seed", "loss_val") + ("loss_end", "loss_half",
                                                                                "loss_2x", "loss_4x")
"""The tidy frame `decide_tuned` reads: one row per run; `loss_val` is the validation half's
loss at the end (it picks each arm's rate), the `loss_*` columns the test half's
endpoints (NaN where an arm has none, e.g. a learned table on longer windows)."""
ARMS = (REFERENCE,) + MATRIX_CONTROLS + tuple(f"base {t:,.0f}" for t in BASES)
VERDICT_COLUMNS = ["size", "family", "comparison", "endpoint", "primary", "lr_reference", "lr_control",
                   "n", "effect", "ci_low", "ci_high", "margin", "p", "level", "test", "stage", "verdict"]
VERDICT_WORDS = {"lower": "better", "higher": "worse"}  # a lower loss is the better one


def check_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The frame with an `arm` label (variant, or `base N` for the reference at another
    rotation base); a missing column or an unknown size is a ValueError naming it."""
    missing = [c for c in COLUMNS if c not in runs.columns]
    if missing:
        raise ValueError(f"the runs frame lacks column(s) {missing}; decide_tuned reads {list(COLUMNS)}")
    sizes = set(runs["size"]) - set(SIZES)
    if sizes:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {sorted(sizes)}")
    label = np.where((runs.variant == REFERENCE) & (runs.rope_theta != REFERENCE_THETA),
                     runs.rope_theta.map(lambda t: f"base {t:,.0f}"), runs.variant)
    return runs.assign(arm=label)


def best_rates(runs: pd.DataFrame) -> pd.Series:
    """Each (size, arm)'s best learning-rate scale: the lowest mean validation loss over
    `LR_SEEDS`, among the scales run on all of them (NaN until one is)."""
    rows = runs[runs.seed.isin(LR_SEEDS)]
    means = rows.groupby(["size", "arm", "lr_scale"]).loss_val.agg(["mean", "count"])
    means = means[means["count"] == len(LR_SEEDS)]["mean"]
    return means.groupby(["size", "arm"]).idxmin().map(lambda key: key[2])


def _pairs(runs, size, arm, lr_arm, lr_ref, endpoint) -> pd.DataFrame:
    """(seed, difference in `UNIT`s) of arm at lr_arm against the reference at lr_ref."""
    def side(label, lr):
        g = runs[(runs["size"] == size) & (runs.arm == label) & (runs.lr_scale == lr)]
        return g[["seed", endpoint]].dropna()
    pair = side(REFERENCE, lr_ref).merge(side(arm, lr_arm), on="seed", suffixes=("_r", "_c"))
    diff = np.round((pair[f"{endpoint}_c"] - pair[f"{endpoint}_r"]).to_numpy(float) / UNIT)
    return pd.DataFrame({"seed": pair.seed.to_numpy(), "d": diff.astype(np.int64)}).sort_values("seed")


def stage_row(test: str, pair: pd.DataFrame, design: TwoStage, primary: bool) -> tuple:
    """((first, added, stopped) or None while seeds are missing, the stage in words, the
    differences used so far). A secondary row is one stage on the stage-one seeds."""
    d = pair.set_index("seed").d
    first = d.reindex(design.first_seeds).dropna().to_numpy(np.int64)
    if len(first) < design.n1:
        return None, f"{len(first)} of {design.n1} stage-one seeds so far", first
    if not primary:
        return (first, None, False), "secondary: stage one only", first
    look = first_look(test, first, design, MARGIN / UNIT)
    if look != "continue":
        return (first, None, True), f"{look} at stage one", first
    added = d.reindex(design.added_seeds).dropna().to_numpy(np.int64)
    if len(added) < len(design.added_seeds):
        return None, (f"continued: {len(added)} of {len(design.added_seeds)} added seeds so far"), \
            np.concatenate([first, added])
    return (first, added, False), f"continued: {design.n_max} seeds", np.concatenate([first, added])


def _effect(test: str, used: np.ndarray, lo: float, hi: float) -> float:
    """The mean (or, for the sign test, the median) of the differences used, in the interval."""
    if not len(used):
        return math.nan
    centre = float(np.median(used) if CANDIDATES[test][1] == "median" else np.mean(used))
    return min(max(centre, lo), hi)


def _finish(test: str, staged: list, decisions: list, common: dict) -> list[dict]:
    """The verdict rows of one family: interval ends and effect in nats per character."""
    out = []
    for (arm, lrs, row, stage, used), dec in zip(staged, decisions):
        lo = hi = math.nan
        if row is not None:
            lo, hi = interval_ends(dec["tails"], dec["level"], used, MARGIN / UNIT)
        effect = _effect(test, used, -math.inf if row is None else lo, math.inf if row is None else hi)
        out.append(common | {"comparison": arm, "lr_reference": lrs[0], "lr_control": lrs[1],
                             "n": len(used), "effect": effect * UNIT, "ci_low": lo * UNIT,
                             "ci_high": hi * UNIT, "margin": MARGIN, "p": dec["p"], "level": dec["level"],
                             "test": test, "stage": stage,
                             "verdict": VERDICT_WORDS.get(dec["verdict"], dec["verdict"])})
    return out


def _family_rows(runs, best, size, family, endpoint, test) -> list[tuple]:
    """(arm, (reference rate, arm rate), staged row, stage, differences) of one family's
    arms present at `size`; the common-rate endpoint puts the arm at the reference's rate."""
    arms = MATRIX_CONTROLS if family == "matrix" else tuple(f"base {t:,.0f}" for t in BASES)
    present = set(runs.loc[runs["size"] == size, "arm"])
    common = endpoint == SECONDARY[0]
    metric = PRIMARY if common else endpoint
    ref_lr = best.get((size, REFERENCE), math.nan)
    out = []
    for arm in (a for a in arms if a in present):
        arm_lr = ref_lr if common else best.get((size, arm), math.nan)
        if math.isnan(ref_lr) or math.isnan(arm_lr):
            out.append((arm, (ref_lr, arm_lr), None, "rate selection pending", np.zeros(0, np.int64)))
            continue
        pair = _pairs(runs, size, arm, arm_lr, ref_lr, metric)
        if pair.empty:  # e.g. a learned position table on longer windows
            continue
        row, stage, used = stage_row(test, pair, SIZES[size], endpoint == PRIMARY)
        out.append((arm, (ref_lr, arm_lr), row, stage, used))
    return out


def decide_tuned(runs: pd.DataFrame, tests: dict | None = None) -> pd.DataFrame:
    """Every comparison of the next text study decided by the registered rule (the module's
    docstring): one row per size × family × comparison × endpoint with the rates compared,
    the seeds used (`n`), the effect (control − reference, nats per character; negative:
    the control's loss is lower), its interval at the row's level, p, the level, the test,
    the stage and the verdict (`better`, `worse`, `equivalent`, `undecided`, `pending`).
    `runs` is the tidy frame of `COLUMNS`; `tests` (size -> candidate) defaults to the
    registered `TESTS`."""
    tests = TESTS if tests is None else tests
    for size in SIZES:
        stage_test(tests.get(size, ""))
    runs = check_frame(runs)
    best = best_rates(runs)
    out = []
    for size in (s for s in SIZES if s in set(runs["size"])):
        for family in FAMILIES:
            for endpoint in ENDPOINTS:
                test = tests[size]
                staged = _family_rows(runs, best, size, family, endpoint, test)
                if not staged:
                    continue
                decisions = decide_family(test, [s[2] for s in staged], SIZES[size], MARGIN / UNIT)
                common = {"size": size, "family": family, "endpoint": endpoint,
                          "primary": endpoint == PRIMARY}
                out += _finish(test, staged, decisions, common)
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


def added_arms(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The runs the two-stage rule adds: for every primary row stage one sent on, both of
    its arms (the reference at its best rate, the arm at its own) on the size's added
    seeds. Columns size, variant, rope_theta, lr_scale, seeds."""
    go = verdicts[verdicts.primary.astype(bool) & verdicts.stage.str.startswith("continued")]
    arms = set()
    for r in go.itertuples():
        arms |= {(r.size, REFERENCE, r.lr_reference), (r.size, r.comparison, r.lr_control)}
    rows = []
    for size, arm, lr in sorted(arms):
        variant, theta = (REFERENCE, float(arm[5:].replace(",", ""))) if arm.startswith("base ") else \
            (arm, REFERENCE_THETA)
        rows.append({"size": size, "variant": variant, "rope_theta": theta, "lr_scale": float(lr),
                     "seeds": SIZES[size].added_seeds})
    return pd.DataFrame(rows, columns=["size", "variant", "rope_theta", "lr_scale", "seeds"])
