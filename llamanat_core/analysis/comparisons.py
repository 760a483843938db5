"""The study's comparisons: which rows are compared, and how each is decided.

`decide(results)` pairs every control with its reference seed by seed (the matrix, the
length table, the rotation sweep, the answer alphabet) and decides each comparison on the
endpoints fixed in advance (`QUESTIONS`: speed, accuracy at 8 and 12 pairs, and accuracy
at 1,200 steps as a secondary) by paired exact sign-flip tests in two stages
(`llamanat_core.analysis.sequential`), Holm within each family. `decision_row` finds one row for a
chapter's sentence, `interval_agrees` checks a row's interval against its verdict;
`runs_table` gives one row per run, and `loss_at_stop` / `largest_gap` the memorisation gap.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.config import REGIMES  # noqa: F401  (the data regimes, re-exported for the chapters)
from ..study.plan import arm_of
from . import paired, sequential, stats
from .families import decide_families, pair_by_seed, second_stage, stage_pairs
from .stats import at_chance

METRIC_COLUMNS = {"test_acc": 4, "test_acc_8": 8, "test_acc_12": 12}
"""Accuracy column -> recall pairs it is scored at (addition ignores the pairs)."""

SWEEP_REFERENCE_THETA = 10_000.0


def at_settings(frame: pd.DataFrame, answer: str = "name",
                rope_theta: float = SWEEP_REFERENCE_THETA) -> pd.DataFrame:
    """The rows with one answer formulation and rotation base; by default the study's own
    (`name` answers, the reference base), so neither the sweep's other bases nor the
    alphabet's `copy` formulation slip in. Works on results, runs and curves."""
    return frame[(frame.answer == answer) & np.isclose(frame.rope_theta, rope_theta)]


def variant_rows(frame: pd.DataFrame, variant: str, task: str, regime: str | None = None,
                 answer: str = "name", rope_theta: float = SWEEP_REFERENCE_THETA) -> pd.DataFrame:
    """The rows of `variant` on `task` (in `regime`, if given) at the study's own settings
    (or at the `answer` and `rope_theta` given: `at_settings`)."""
    rows = at_settings(frame, answer, rope_theta)
    keep = (rows.variant == variant) & (rows.task == task)
    if regime is not None:
        keep &= rows.regime == regime
    return rows[keep]


def runs_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its identity, time to solve, and accuracies at the checkpoint and the stop.

    From the tidy results frame (one row per measurement, run, checkpoint): the row
    flagged `final` gives the accuracies at the fixed checkpoint, the row flagged
    `at_stop` the accuracy at the stop. A censored run's `time` is its stop step. The
    same run listed under several measurements appears once.
    """
    df = results.drop_duplicates(subset=["run", "step"])
    if "regime" not in df:
        df = df.assign(regime="finite")
    ident = ["run", "task", "variant", "regime", "seed", "answer", "rope_theta",
             "solve_step", "censored", "stop_step", "steps"]
    final = df[df["final"].astype(bool)]
    out = final[ident + ["step", *METRIC_COLUMNS]].rename(columns={"step": "checkpoint"})
    stop = df[df["at_stop"].astype(bool)][["run", "test_acc", "test_acc_8", "test_acc_12"]].rename(
        columns={"test_acc": "stop_acc", "test_acc_8": "stop_acc_8", "test_acc_12": "stop_acc_12"})
    out = out.merge(stop, on="run", how="left")
    censored = out["censored"].astype(bool)
    if (~censored & out["solve_step"].isna()).any():
        raise ValueError("a run is neither censored nor has a solve step")
    out["censored"] = censored
    out["time"] = np.where(censored, out["stop_step"], out["solve_step"]).astype(float)
    # time to solve restricted to the cap: observed for every run (a run is censored only at the cap)
    capped = np.where(censored, out["steps"], out["solve_step"])
    out["time_capped"] = np.minimum(capped, out["steps"]).astype(float)
    return out.reset_index(drop=True)


def _comparisons(results: pd.DataFrame, reference: str, adjust=None):
    """Every comparison the study decides, as (measurement, task, regime, comparison label,
    reference label, control label, reference runs, control runs); runs as in `runs_table`.

    A reference row may live under another measurement (the sweep's base 10,000 and the
    alphabet's `name` runs are matrix runs), so references are looked up in the
    measurement's own runs together with the recall matrix runs, each run once.
    """
    adjust = adjust or (lambda runs: runs)
    runs = {m: adjust(runs_table(g)) for m, g in results.groupby("measurement", sort=False)}
    matrix = runs.get("matrix", pd.DataFrame())
    recall_matrix = matrix[(matrix.task == "recall") & (matrix.answer == "name")] if len(matrix) else matrix

    def pool(*frames):  # the same run may be listed under two measurements: keep it once
        frames = [f for f in frames if len(f)]
        return pd.concat(frames).drop_duplicates("run") if frames else pd.DataFrame()

    if len(matrix):
        for (task, regime), g in matrix.groupby(["task", "regime"], sort=True):
            ref = g[g.variant == reference]
            for v in [v for v in g.variant.unique() if v != reference]:
                yield "matrix", task, regime, f"{v} vs {reference}", reference, v, ref, g[g.variant == v]
    length = pool(runs.get("length", pd.DataFrame()), recall_matrix)
    if len(length):
        for regime, g in length.groupby("regime", sort=True):
            ref = g[g.variant == reference]
            for v in [v for v in g.variant.unique() if v != reference]:
                yield "length", "recall", regime, f"{v} vs {reference}", reference, v, ref, g[g.variant == v]
    if "sweep" in runs:
        sweep = runs["sweep"]
        theta_ref = recall_matrix[recall_matrix.variant == reference] if len(recall_matrix) else recall_matrix
        allruns = pool(sweep, theta_ref)
        for regime, g in sweep.groupby("regime", sort=True):
            p = allruns[allruns.regime == regime]
            ref = p[np.isclose(p.rope_theta, SWEEP_REFERENCE_THETA)]
            for th in sorted(t for t in g.rope_theta.unique() if not np.isclose(t, SWEEP_REFERENCE_THETA)):
                lab, rlab = f"rope_theta={th:,.0f}", f"rope_theta={SWEEP_REFERENCE_THETA:,.0f}"
                ctl = g[np.isclose(g.rope_theta, th)]
                yield "sweep", "recall", regime, f"{lab} vs {rlab}", rlab, lab, ref, ctl
    if "alphabet" in runs:
        alpha = runs["alphabet"]
        allruns = pool(alpha, recall_matrix)
        for regime, g in alpha.groupby("regime", sort=True):
            p = allruns[allruns.regime == regime]
            for v in g.variant.unique():
                ref = p[(p.variant == v) & (p.answer == "name")]
                ctl = g[(g.variant == v) & (g.answer == "copy")]
                if len(ctl):
                    label = f"copy vs name ({v})"
                    yield "alphabet", "recall", regime, label, f"{v} name", f"{v} copy", ref, ctl


# ---------------------------------------------------------------- memorisation

def loss_at_stop(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per run: training and validation loss at its last evaluation, their gap
    (validation − training: large when a run memorised its training items), and whether
    it solved."""
    last = curves.sort_values("step").groupby("run", sort=False).tail(1)
    out = last[["run", "task", "variant", "regime", "seed", "answer", "rope_theta", "censored",
                "solve_step", "stop_step", "train_loss", "val_loss", "val_acc"]].copy()
    out["gap"] = out.val_loss - out.train_loss
    out["solved"] = ~out.censored.astype(bool)
    return out.sort_values(["task", "variant", "regime", "seed"]).reset_index(drop=True)


def largest_gap(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the largest validation − training loss over all its evaluations
    (up to its stop), the step where it occurred, and whether the run solved. A run that
    memorised its training items at any time shows a large value even if it later
    generalised; one whose validation loss tracked its training loss shows a small one."""
    d = curves.assign(gap=curves.val_loss - curves.train_loss)
    idx = d.groupby("run", sort=False)["gap"].idxmax()
    out = d.loc[idx, ["run", "task", "variant", "regime", "seed", "answer", "rope_theta",
                      "censored", "solve_step", "stop_step", "step", "gap"]]
    out = out.rename(columns={"step": "gap_step", "gap": "max_gap"})
    out["solved"] = ~out.censored.astype(bool)
    return out.sort_values(["task", "variant", "regime", "seed"]).reset_index(drop=True)


# ---------------------------------------------------------------- endpoints fixed in advance

@dataclass(frozen=True)
class Endpoint:
    """What one question is decided on: a per-run column, compared seed by seed.

    Differences are taken in integer `unit`s so the sign-flip tests count exactly: a log
    ratio in hundredths (speed; a rounding of at most 0.5 % of the ratio) or an accuracy in
    items of the 200. `margin` is the equivalence margin on that scale: the ratio 0.8–1.25
    as logs, or ±0.15 accuracy.
    """
    name: str
    column: str
    unit: float
    log: bool
    higher_is_better: bool
    margin: float
    n_pairs: int = 4
    primary: bool = True
    first_seeds_only: bool = False


SPEED = Endpoint("speed", "time_capped", 0.01, True, False, math.log(1.25))
LENGTH_8 = Endpoint("length_8", "stop_acc_8", 1 / stats.N_ITEMS, False, True, 0.15, n_pairs=8)
LENGTH_12 = Endpoint("length_12", "stop_acc_12", 1 / stats.N_ITEMS, False, True, 0.15, n_pairs=12)
ACC_1200 = Endpoint("test_acc@1200", "test_acc", 1 / stats.N_ITEMS, False, True, 0.15,
                    primary=False, first_seeds_only=True)
ENDPOINTS = {e.name: e for e in (SPEED, LENGTH_8, LENGTH_12, ACC_1200)}

QUESTIONS = {
    "matrix": (SPEED, ACC_1200),
    "length": (LENGTH_8, LENGTH_12),
    "sweep": (SPEED, LENGTH_8, LENGTH_12, ACC_1200),
    "alphabet": (SPEED, LENGTH_8, ACC_1200),
}
"""Per measurement, the endpoints it is decided on (primary) and reported on (secondary).
Speed of learning: the time to solve restricted to the cap, min(solve step, cap), which
every run observes; generalisation to longer contexts: accuracy at 8 and 12 pairs at each
run's last step. Accuracy at 1,200 steps stays as a secondary, on the first ten seeds, for
the comparison with the earlier published study."""

DESIGN_TEST = ("paired exact sign-flip, two stages combined by the inverse-normal method "
               "(seeds 0–9, then 10–39 where undecided)")
FIXED_TEST = "paired exact sign-flip on seeds 0–9"

DECISION_COLUMNS = [
    "measurement", "comparison", "task", "regime", "metric", "primary", "reference", "control",
    "n", "reference_value", "control_value", "effect", "ci_low", "ci_high", "margin_low",
    "margin_high", "p", "p_holm", "level", "test", "verdict", "stopped", "prob_better",
    "prob_better_low", "prob_better_high", "seeds_needed", "reference_arm", "control_arm",
    "reference_solved", "control_solved", "uninformative", "bound", "ci_low_ties", "ci_high_ties"]

LATE_COLUMNS = ["q_bh", "registered_verdict", "post_hoc"]
"""Columns `decide` adds once every row is tested: across families, and across analyses."""

ANALYSES = ("corrected", "registered")
"""`decide(analysis=...)`: the book's analysis, or the one fixed before the added seeds ran."""

RARELY_SOLVED = "rarely solved"
MOSTLY_AT_CHANCE = "mostly at chance"


def _units(pair: pd.DataFrame, ep: Endpoint) -> np.ndarray:
    """Per-seed differences control − reference in integer units of the endpoint."""
    r, c = pair[f"{ep.column}_r"].to_numpy(float), pair[f"{ep.column}_c"].to_numpy(float)
    d = (np.log(c) - np.log(r)) if ep.log else (c - r)
    return np.round(d / ep.unit).astype(np.int64)


def _bounds(ep: Endpoint, pair: pd.DataFrame) -> tuple[int, int]:
    """The range a mean difference can take, in units: ±1 accuracy, or ± log(cap / first evaluation)."""
    if ep.log:
        cap = float(pair.steps_r.max())
        top = int(math.ceil(math.log(cap / 100.0) / ep.unit)) + 1
    else:
        top = int(round(1 / ep.unit))
    return -top, top


def _arm(g: pd.DataFrame) -> tuple:
    first = g.iloc[0]
    return arm_of(first.task, first.variant, first.regime, first.rope_theta, first.answer)


def _both_at_chance(pair: pd.DataFrame, ep: Endpoint, task: str) -> bool:
    if ep.name == "speed":
        nobody = bool(pair.censored_r.all() and pair.censored_c.all())
        return nobody and at_chance(pair.stop_acc_r.mean(), task) and at_chance(pair.stop_acc_c.mean(), task)
    return at_chance(pair[f"{ep.column}_r"].mean(), task, ep.n_pairs) and \
        at_chance(pair[f"{ep.column}_c"].mean(), task, ep.n_pairs)


def _informative(used: pd.DataFrame, ep: Endpoint, task: str) -> dict:
    """What the pairs can say. For speed, each arm's solve count (solved k of n comes before
    any ratio), and which arm never solves: then min(solve step, cap) stops at the cap for
    it, so its ratio is a bound, not a speed. Uninformative pairs: both runs at the cap
    (speed) or both at chance (accuracy): their difference is 0, or noise about 0, whatever
    the true difference is, so they say nothing about it."""
    if ep.name == "speed":
        ref_solved = int((~used.censored_r.astype(bool)).sum())
        ctl_solved = int((~used.censored_c.astype(bool)).sum())
        idle = used.censored_r.astype(bool) & used.censored_c.astype(bool)
        bound = ("lower" if ctl_solved == 0 < ref_solved else
                 "upper" if ref_solved == 0 < ctl_solved else "")
        return {"reference_solved": ref_solved, "control_solved": ctl_solved,
                "uninformative": int(idle.sum()), "bound": bound, "_idle": idle.to_numpy()}
    chance = [used[f"{ep.column}_{s}"].map(lambda a: at_chance(a, task, ep.n_pairs)) for s in "rc"]
    idle = chance[0] & chance[1]
    return {"reference_solved": math.nan, "control_solved": math.nan,
            "uninformative": int(idle.sum()), "bound": "", "_idle": idle.to_numpy()}


def _p_value(first, added, ep: Endpoint, analysis: str) -> float:
    if analysis == "registered":
        return sequential.p_value(first, added)
    return paired.p_value(first, added, stopped_early=added is None and not ep.first_seeds_only)


STAGE_ONE_WHY = {"decided": "decided on the first 10 seeds", "equivalent": "equivalent on the first 10 seeds",
                 "continue": f"undecided on the first 10 seeds: {len(sequential.ADDED_SEEDS)} seeds added"}


def stage_one(first, both_at_chance: bool, margin: float, analysis: str = "corrected") -> tuple[bool, str]:
    """Does stage 1 send this comparison on to the added seeds, and why? `first`: its ten
    differences in units, `margin` in units. The corrected analysis asks the test its verdict
    uses (`paired.first_look`, the sign test on the median), so a row is never stopped by one
    test and judged by another; the registered one keeps the sign-flip rule it ran with
    (`sequential.continues`)."""
    if analysis == "registered":
        return sequential.continues(first, both_at_chance=both_at_chance, margin=(-margin, margin))
    if both_at_chance:
        return False, "both at chance"
    look = paired.first_look(np.asarray(first, float), unit=1.0, margin=margin)
    return look == "continue", STAGE_ONE_WHY[look]


def _one_comparison(pair: pd.DataFrame, ep: Endpoint, task: str, analysis: str,
                    stage_rule: str | None = None) -> dict:
    """Everything about one comparison that does not depend on the rest of its family
    (`stage_rule`: whose stage-1 rule sends it on; by default its analysis's own)."""
    pair, first_pairs, added_pairs = stage_pairs(pair, ep.column)
    chance = _both_at_chance(first_pairs, ep, task)
    first = _units(first_pairs, ep)
    pending = False
    if ep.first_seeds_only:
        used, added, stopped = first_pairs, None, "secondary: the first 10 seeds only"
    else:
        go_on, stopped = stage_one(first, chance, ep.margin / ep.unit, stage_rule or analysis)
        use, pending, waiting = second_stage(go_on, added_pairs)
        added = _units(added_pairs, ep) if use else None
        used = pd.concat([first_pairs, added_pairs]) if use else first_pairs
        stopped = waiting or stopped
    d_all = _units(used, ep) * ep.unit
    informative = _informative(used, ep, task)
    r, c = used[f"{ep.column}_r"].to_numpy(float), used[f"{ep.column}_c"].to_numpy(float)
    wins = (d_all > 0) if ep.higher_is_better else (d_all < 0)
    score = float(wins.sum() + 0.5 * (d_all == 0).sum())
    low, high = stats.wilson_interval(score, len(used)) if len(used) else (math.nan, math.nan)
    reference_value = float(np.exp(np.log(r).mean())) if ep.log else float(r.mean())
    control_value = float(np.exp(np.log(c).mean())) if ep.log else float(c.mean())
    return {"n": len(used), "reference_value": reference_value, "control_value": control_value,
            "p": _p_value(first, added, ep, analysis),
            "both_at_chance": chance, "stopped": stopped,
            "_pending": (not ep.first_seeds_only) and pending,
            "prob_better": score / len(used) if len(used) else math.nan, "prob_better_low": low,
            "prob_better_high": high, "_first": first, "_added": added, "_bounds": _bounds(ep, pair),
            "_sd": float(d_all.std(ddof=1)) if len(d_all) > 1 else math.nan,
            "test": FIXED_TEST if ep.first_seeds_only else DESIGN_TEST,
            "_fixed": ep.first_seeds_only, "_idle_ties": int(((d_all == 0) & informative.pop("_idle")).sum()),
            **informative}


def _verdict(row: dict, ep: Endpoint, lo: float, hi: float, analysis: str) -> str:
    """The verdict read off the interval [lo, hi] (in units). The corrected analysis first
    asks whether the pairs can carry a verdict: a speed row where either arm solves fewer
    than half its seeds is `rarely solved` (its ratio mostly compares the cap with itself),
    and equivalence needs more than half the pairs informative, else `mostly at chance`,
    and no end made by uninformative ties; the registered analysis reads the interval
    alone, as it ran."""
    m = ep.margin / ep.unit
    corrected = analysis == "corrected"
    if row["both_at_chance"]:
        return "both at chance"
    if row["_pending"]:  # its verdict waits for the added seeds (`decide`)
        return "undecided"
    fewest_solved = min(row["reference_solved"], row["control_solved"])
    if corrected and ep.name == "speed" and fewest_solved < row["n"] / 2:
        return RARELY_SOLVED
    reading = paired.read_interval(lo, hi, m)
    if reading in ("higher", "lower"):
        return "better" if (reading == "higher") == ep.higher_is_better else "worse"
    if reading == "equivalent":
        if corrected and row["uninformative"] > row["n"] / 2:
            return MOSTLY_AT_CHANCE
        return "undecided" if corrected and _tied_end(row, lo, hi) else "equivalent"
    return "undecided"


def _tied_end(row: dict, lo: float, hi: float) -> bool:
    """Does an end sit exactly at no difference while some uninformative pairs (both at the
    cap, both at chance) tie there? Then those pairs, not the data, put it there."""
    return row["_idle_ties"] > 0 and (lo == 0 or hi == 0)


def _interval(row: dict, analysis: str) -> tuple[float, float, float]:
    """(low, high, estimate) in units. Registered: the sign-flip interval for the centre of
    symmetry (`sequential`); corrected: the sign-test interval for the median seed
    (`paired`), a comparison that stopped early judged at the level its stop spent."""
    first, added, bounds = row["_first"], row["_added"], row["_bounds"]
    if analysis == "registered":
        lo, hi = sequential.interval(first, added, row["level"], bounds)
        return lo, hi, sequential.estimate(first, added, bounds, (lo, hi))
    stopped_early = added is None and not row["_fixed"]
    level = min(row["level"], sequential.ALPHA_FIRST) if stopped_early else row["level"]
    lo, hi = paired.interval(first, added, level)
    lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return lo, hi, paired.estimate(first, added, (lo, hi))


def _finish(row: dict, ep: Endpoint, analysis: str) -> dict:
    """The interval at the row's Holm level, and the verdict read off it. An end made by
    uninformative tied pairs (`_tied_end`) is flagged, not shown as an end, and in the
    corrected analysis cannot make a row equivalent. (Registered: the first shift past 0
    turns every tie into a same-signed difference, so sign flips reject it; corrected:
    the tied pairs are the order statistic the end falls on.)"""
    lo, hi, centre = _interval(row, analysis)
    m = ep.margin / ep.unit
    verdict = _verdict(row, ep, lo, hi, analysis)
    scale = (lambda k: math.exp(k * ep.unit)) if ep.log else (lambda k: k * ep.unit)
    needed = math.nan
    if verdict == "undecided":
        needed = stats.seeds_for_power(centre * ep.unit, row["_sd"], row["level"])
    ties = row["_idle_ties"] > 0
    return {"effect": scale(centre), "ci_low": scale(lo), "ci_high": scale(hi),
            "margin_low": scale(-m), "margin_high": scale(m), "verdict": verdict, "seeds_needed": needed,
            "ci_low_ties": bool(ties and lo == 0), "ci_high_ties": bool(ties and hi == 0)}


def _decision_rows(results, reference, analysis, adjust, stage_rule, endpoints) -> list[dict]:
    """One row per comparison and endpoint, each decided on its own (before Holm)."""
    rows = []
    for measurement, task, regime, label, rlab, clab, ref, ctl in _comparisons(results, reference, adjust):
        pair = pair_by_seed(ref, ctl)
        if pair.empty:
            continue
        for ep in (endpoints[e.name] for e in QUESTIONS[measurement]):
            row = _one_comparison(pair, ep, task, analysis, stage_rule)
            rows.append({"measurement": measurement, "comparison": label, "task": task, "regime": regime,
                         "metric": ep.name, "primary": ep.primary, "reference": rlab, "control": clab,
                         "reference_arm": _arm(ref), "control_arm": _arm(ctl), **row})
    return rows


def decide(results: pd.DataFrame, reference: str = "llama", analysis: str = "corrected",
           adjust=None, with_registered: bool = True, stage_rule: str | None = None,
           margin_scale: float = 1.0) -> pd.DataFrame:
    """Every comparison of the study decided on the endpoints fixed in `QUESTIONS`.

    Per comparison: the paired per-seed differences; stage 1 (seeds 0–9) and, where
    `stage_one` sent it on (the sign test; registered: sign flips), the added seeds; the
    design's exact p; Holm within each family (measurement × task × regime × endpoint),
    which gives each row the level it is tested at (`level`); the interval of the effect
    inverted from the same test at that level; and the verdict read off the interval
    (`better`/`worse` when it excludes no difference, `equivalent` when it lies inside the
    margin, `both at chance`, `undecided`). The effect is the test's median-unbiased
    estimate (`sequential.estimate`, inside its interval): for speed a ratio control /
    reference of the restricted time to solve (below 1 the control learns sooner), for
    accuracy a difference. `prob_better` is
    the chance the control beats the reference on a new seed (ties half), with a Wilson
    interval; `seeds_needed` the seeds per arm for 80 % power at
    the observed effect, for an undecided row. A family in which every row is at chance is
    one row, verdict `not learned`.

    `analysis="registered"` reads the verdicts as the analysis fixed before the added seeds
    ran; the default, `corrected`, adds `rarely solved` and `mostly at chance` (`_verdict`).
    Every speed row carries both arms' solve counts; `bound` says when its ratio is a bound.
    The corrected frame also carries each row's `registered_verdict`, and `post_hoc`: a
    decision (better, worse, equivalent) only the corrected analysis makes, which headline
    counts leave out. `q_bh` is the Benjamini–Hochberg adjusted p over every primary row.
    `adjust`, if given, maps each measurement's `runs_table` before pairing (the
    sensitivity analyses: another solve threshold, cap or step; `sensitivity.py`), and
    `with_registered=False` skips the registered pass (its two columns are then missing).
    `stage_rule="registered"` sends rows on by the registered sign-flip rule while judging them
    by `analysis` (the book's construction before stage one asked the verdict's test:
    `stage_one_moves`). `margin_scale` multiplies every equivalence margin (on the scale the
    endpoint is tested on: the speed margin as a log ratio), for `margin_sensitivity`.
    """
    if analysis not in ANALYSES:
        raise ValueError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
    if not margin_scale > 0:
        raise ValueError(f"margin_scale must be positive, got {margin_scale}")
    endpoints = {e.name: dataclasses.replace(e, margin=e.margin * margin_scale) for e in ENDPOINTS.values()}
    rows = _decision_rows(results, reference, analysis, adjust, stage_rule, endpoints)
    if not rows:
        return pd.DataFrame(columns=DECISION_COLUMNS + LATE_COLUMNS)
    family = ["measurement", "task", "regime", "metric"]
    # a row waiting for its added seeds is shown at the stage-1 level, where the rule that
    # sent it on says its interval neither excludes 0 nor fits the margin
    df = decide_families(rows, family, lambda r: _finish(r, endpoints[r["metric"]], analysis),
                         pending_level=sequential.ALPHA_FIRST)
    df = _not_learned(df[DECISION_COLUMNS + ["both_at_chance"]], family)
    primary = df.primary.astype(bool) & df.p.notna() & ~df.stopped.str.contains("so far")
    df["q_bh"] = pd.Series(stats.benjamini_hochberg(df.p.where(primary)), index=df.index)
    if analysis == "registered":
        return df.assign(registered_verdict=df.verdict, post_hoc=False)
    if not with_registered:
        return df
    registered = decide(results, reference, "registered", adjust, margin_scale=margin_scale)
    return _against_registered(df, registered)


def _against_registered(corrected: pd.DataFrame, registered: pd.DataFrame) -> pd.DataFrame:
    """The registered verdict beside each corrected row; a decision the registered analysis
    did not make is post hoc."""
    key = ["measurement", "comparison", "task", "regime", "metric"]
    was = registered.set_index(key).verdict.rename("registered_verdict")
    out = corrected.join(was, on=key)
    decision = out.verdict.isin(["better", "worse", "equivalent"])
    out["post_hoc"] = decision & (out.verdict != out.registered_verdict)
    return out


def _not_learned(df: pd.DataFrame, family: list[str]) -> pd.DataFrame:
    """A family whose every comparison is at chance becomes one row: on that endpoint
    nothing learned it (a run may still learn the task later, or earlier and lose it)."""
    out = []
    for _, g in df.groupby(family, sort=False):
        if len(g) > 1 and g.both_at_chance.all():
            first = g.iloc[0].copy()
            first["comparison"], first["control"] = "every control", "every control"
            first["verdict"], first["stopped"] = "not learned", "every row at chance"
            for c in ("effect", "ci_low", "ci_high", "p", "p_holm", "prob_better", "prob_better_low",
                      "prob_better_high", "seeds_needed", "control_value", "control_solved"):
                first[c] = math.nan
            out.append(first.to_frame().T)
        else:
            out.append(g)
    return pd.concat(out).drop(columns="both_at_chance").reset_index(drop=True)


def row_differences(results: pd.DataFrame, reference: str = "llama") -> list[dict]:
    """Every primary comparison's own per-seed differences (control − reference, integer
    units of its endpoint, every seed both rows have), for resampling studies of the design
    (`benchmarks/sequential_design.py --resample`); rows at chance on their first ten seeds
    are left out (they are never tested). Each: measurement, comparison, task, regime,
    metric, differences, margin (units), bounds (units)."""
    out = []
    for measurement, task, regime, label, _, _, ref, ctl in _comparisons(results, reference):
        pair = pair_by_seed(ref, ctl)
        for ep in (e for e in QUESTIONS[measurement] if e.primary):
            used = pair[pair[f"{ep.column}_r"].notna() & pair[f"{ep.column}_c"].notna()]
            if used.empty or _both_at_chance(used[used.seed.isin(sequential.FIRST_SEEDS)], ep, task):
                continue
            out.append({"measurement": measurement, "comparison": label, "task": task, "regime": regime,
                        "metric": ep.name, "differences": _units(used, ep), "margin": ep.margin / ep.unit,
                        "bounds": _bounds(ep, used)})
    return out


def added_seed_arms(decisions: pd.DataFrame) -> list[tuple]:
    """The rows (task, variant, regime, rope_theta, answer) that the stage-1 rule sends on
    to the added seeds: both rows of every primary comparison undecided on its first ten."""
    undecided = decisions.stopped.str.startswith("undecided on the first")
    go = decisions[decisions.primary.astype(bool) & undecided]
    arms = {a for pair in zip(go.reference_arm, go.control_arm) for a in pair}
    return sorted(arms)


def decision_row(decisions: pd.DataFrame, measurement: str, control: str, task: str, regime: str,
                 metric: str) -> pd.Series:
    """The row of `decide()` for one comparison, found by its control's name; a row the
    decisions lack (a reader's short run may fold a family into one `not learned` line)
    comes back with verdict `absent` and NaN numbers, so a sentence about it can say so."""
    d = decisions
    hit = d[(d.measurement == measurement) & (d.control == control) & (d.task == task)
            & (d.regime == regime) & (d.metric == metric)]
    if len(hit):
        return hit.iloc[0]
    return pd.Series({c: np.nan for c in d.columns} | {"metric": metric, "verdict": "absent",
                                                         "control": control, "task": task, "regime": regime})


def interval_agrees(row) -> bool:
    """Does the row's interval say what its verdict says? It lies on the better side of no
    difference (ratio 1, gap 0) exactly when the verdict is better, on the worse side exactly
    when it is worse, and inside the margin without excluding it exactly when equivalent (or
mostly at chance, which is what equivalence reads as when most pairs are uninformative);
an end made by tied pairs is no end to be inside the margin; a rarely solved row reads no
verdict off its interval."""
    ep = ENDPOINTS[row.metric]
    null = 1.0 if ep.log else 0.0
    above, below = row.ci_low > null, row.ci_high < null
    better = above if ep.higher_is_better else below
    worse = below if ep.higher_is_better else above
    tied = bool(getattr(row, "ci_low_ties", False)) or bool(getattr(row, "ci_high_ties", False))
    inside = row.margin_low < row.ci_low and row.ci_high < row.margin_high and not tied
    if row.verdict == RARELY_SOLVED:  # the interval is shown, but no verdict is read off it
        return True
    if row.verdict == MOSTLY_AT_CHANCE:  # it would read equivalent, were most pairs informative
        return inside and not (above or below)
    return better == (row.verdict == "better") and worse == (row.verdict == "worse") and \
        (inside and not (above or below)) == (row.verdict == "equivalent")


def _look(stopped: str) -> str:
    """A row's stage-1 outcome from its `stopped` text: decided, equivalent, continue, or other."""
    for look, why in STAGE_ONE_WHY.items():
        if stopped.startswith(why.split(":")[0]):
            return look
    return stopped


def missing_added_runs(decisions: pd.DataFrame, runs: pd.DataFrame) -> dict[tuple, int]:
    """Per arm that a row waiting for its added seeds needs, how many of seeds 10–39 have no
    run yet (what `llamanat study --added-seeds` would train for it)."""
    waiting = decisions[decisions.stopped.str.contains("so far")]
    arms = {a for pair in zip(waiting.reference_arm, waiting.control_arm) for a in pair}
    have = runs[runs.seed.isin(sequential.ADDED_SEEDS)]
    present = collections.Counter(arm_of(r.task, r.variant, r.regime, r.rope_theta, r.answer)
                                  for r in have.drop_duplicates("run").itertuples())
    return {a: len(sequential.ADDED_SEEDS) - present.get(a, 0) for a in sorted(arms)
            if present.get(a, 0) < len(sequential.ADDED_SEEDS)}


def stage_one_moves(results: pd.DataFrame, reference: str = "llama") -> pd.DataFrame:
    """Every primary row whose stage-1 outcome depends on the rule: the registered sign-flip
    rule's (`rule_before`) against the sign test the verdict uses (`rule_now`), the verdict
    the corrected analysis gave under each, and whether the added seeds it now needs exist
    (`seeds`: `present`, or how many runs of which arms are missing)."""
    key = ["measurement", "comparison", "task", "regime", "metric"]
    before = decide(results, reference, with_registered=False, stage_rule="registered")
    now = decide(results, reference, with_registered=False)
    both = before.merge(now, on=key, suffixes=("_before", "_now"))
    both = both[both.primary_before.astype(bool)]
    rule_before, rule_now = both.stopped_before.map(_look), both.stopped_now.map(_look)
    moved = both[rule_before != rule_now]
    missing = missing_added_runs(now, runs_table(results))

    def seeds(r) -> str:
        arms = (r.reference_arm_now, r.control_arm_now)
        gaps = [f"{missing[a]} runs of {a[1]} ({a[0]}, {a[2]})" for a in arms if a in missing]
        return "; ".join(gaps) if gaps else "present" if _look(r.stopped_now) == "continue" else "not needed"
    return pd.DataFrame({**{k: moved[k] for k in key}, "rule_before": rule_before[moved.index],
                         "rule_now": rule_now[moved.index], "verdict_before": moved.verdict_before,
                         "verdict_now": moved.verdict_now, "n_now": moved.n_now,
                         "seeds": [seeds(r) for r in moved.itertuples()]}).reset_index(drop=True)


def seed_pairs(results: pd.DataFrame, reference: str = "llama") -> dict[tuple, pd.DataFrame]:
    """Every comparison's runs joined seed by seed (`pair_by_seed`: columns suffixed `_r`,
    `_c`), keyed (measurement, comparison, task, regime) as `decide` labels its rows."""
    return {(m, label, task, regime): pair_by_seed(ref, ctl)
            for m, task, regime, label, _, _, ref, ctl in _comparisons(results, reference)}


def used_pairs(pair: pd.DataFrame, n: int) -> pd.DataFrame:
    """The pairs a row of `decide` with `n` seeds read: the first ten, or those and seeds 10–39."""
    seeds = sequential.FIRST_SEEDS + (sequential.ADDED_SEEDS if n > len(sequential.FIRST_SEEDS) else ())
    return pair[pair.seed.isin(seeds)]
