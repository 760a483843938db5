"""The study's comparisons: which rows are compared, how each is decided, and what a
chapter shows of the decisions.

`verdicts(results)` pairs every control with its reference seed by seed (the matrix, the
length table, the rotation sweep, the answer alphabet), runs the tests of
`llamanat_core.stats` on each metric fixed in advance, corrects within each family
(measurement × task × regime × metric) and gives one verdict per comparison. A chapter
computes the verdicts once on the whole study (`study_verdicts`) and filters them
(`select`, `verdict_row`): it never re-tests a subset, so each Holm family is the
study's. The tables below (verdicts, solve rates, the memorisation gap) are how chapters
show them. The one check that decides again is `leave_one_out`, and it decides the whole
study again with one seed fewer, so its Holm families are the study's too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import sequential, stats
from .report import steps_text
from .stats import (
    ALPHA,
    EQUIVALENCE_MARGIN,
    RATIO_BOUNDS,
    at_chance,
    bootstrap_ci,
    holm,
    km_median,
    logrank_test,
    median_ratio_ci,
    min_logrank_p,
    min_sign_flip_p,
    paired_sign_test_censored,
    sign_flip_test,
)
from .train import REGIMES  # the budget's data regimes, re-exported for the chapters

VERDICTS = ("better", "worse", "equivalent", "both at chance", "undecided")
REGIME_NAMES = {"finite": "finite set (4,000 items, reused)", "fresh": "fresh items every batch"}
METRIC_LABELS = {"time_to_solve": "time to solve", "test_acc": "accuracy",
                 "test_acc_8": "8-pair accuracy", "test_acc_12": "12-pair accuracy"}


# ---------------------------------------------------------------- the comparisons

def verdict(*, both_at_chance: bool, p_holm: float, reachable: bool, direction: float,
            ci_low: float, ci_high: float, equivalence: tuple[float, float]) -> str:
    """One comparison's verdict, in this order.

    1. `both at chance`: both rows are at chance; a gap between two guessers is never
       decided, whatever p says.
    2. `better` / `worse`: Holm-adjusted p < 0.05 and the test could reach the level;
       `direction` > 0 means the control is better (higher accuracy, or solves sooner).
    3. `equivalent`: the 95 % interval of the effect lies inside `equivalence` (±5
       accuracy points, or a median ratio of 0.8–1.25).
    4. `undecided`: everything else (the data cannot tell).
    """
    if both_at_chance:
        return "both at chance"
    if reachable and np.isfinite(p_holm) and p_holm < ALPHA and direction != 0:
        return "better" if direction > 0 else "worse"
    lo, hi = equivalence
    if np.isfinite(ci_low) and np.isfinite(ci_high) and lo <= ci_low and ci_high <= hi:
        return "equivalent"
    return "undecided"


METRIC_COLUMNS = {"test_acc": 4, "test_acc_8": 8, "test_acc_12": 12}
"""Accuracy column -> recall pairs it is scored at (addition ignores the pairs)."""

MEASUREMENT_METRICS = {
    "matrix": ("time_to_solve", "test_acc"),
    "length": ("test_acc_8", "test_acc_12"),
    "sweep": ("time_to_solve", "test_acc"),
    "alphabet": ("time_to_solve", "test_acc", "test_acc_8"),
}
"""The metrics each measurement is decided on, fixed in advance. Accuracies are taken at
the fixed checkpoint (1,200 steps in the study) and named e.g. `test_acc@1200`; accuracy at
the stop is reported elsewhere and not tested (runs stopped at different steps)."""

SWEEP_REFERENCE_THETA = 10_000.0


def variant_rows(frame: pd.DataFrame, variant: str, task: str, regime: str | None = None) -> pd.DataFrame:
    """The rows of `variant` on `task` (in `regime`, if given) at the study's own settings:
    `name` answers and the reference rotation base, so neither the sweep's other bases
    nor the alphabet's `copy` formulation slip in. Works on results, runs and curves."""
    keep = ((frame.variant == variant) & (frame.task == task) & (frame.answer == "name")
            & np.isclose(frame.rope_theta, SWEEP_REFERENCE_THETA))
    if regime is not None:
        keep &= frame.regime == regime
    return frame[keep]

TESTS = {
    "time_to_solve": "log-rank (two-sided)",
    "accuracy": "exact sign-flip permutation of the paired mean difference (all 2^n flips, two-sided)",
}


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


def _comparisons(results: pd.DataFrame, reference: str):
    """Every comparison the study decides, as (measurement, task, regime, comparison label,
    reference label, control label, reference runs, control runs); runs as in `runs_table`.

    A reference row may live under another measurement (the sweep's base 10,000 and the
    alphabet's `name` runs are matrix runs), so references are looked up in the
    measurement's own runs together with the recall matrix runs, each run once.
    """
    runs = {m: runs_table(g) for m, g in results.groupby("measurement", sort=False)}
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


def _paired(ref: pd.DataFrame, ctl: pd.DataFrame) -> pd.DataFrame:
    """The two rows joined seed by seed; only seeds present in both count."""
    for name, g in (("reference", ref), ("control", ctl)):
        if g.seed.duplicated().any():
            twice = sorted(g.seed[g.seed.duplicated()])
            raise ValueError(f"the {name} row has two runs for one seed: {twice}")
    return ref.merge(ctl, on="seed", suffixes=("_r", "_c")).sort_values("seed").reset_index(drop=True)


def _time_to_solve(pair: pd.DataFrame, task: str, seed: int) -> dict:
    n = len(pair)
    sr, cr = pair.time_r.to_numpy(), pair.censored_r.to_numpy()
    sc, cc = pair.time_c.to_numpy(), pair.censored_c.to_numpy()
    nobody = bool(cr.all() and cc.all())
    # nobody solved and both rows still guess at the stop
    both_chance = nobody and at_chance(pair.stop_acc_r.mean(), task) and \
        at_chance(pair.stop_acc_c.mean(), task)
    z, p = logrank_test(sc, cc, sr, cr)
    ratio, low, high = median_ratio_ci(sc, cc, sr, cr, seed=seed)
    *_, p_sign = paired_sign_test_censored(sc, cc, sr, cr)
    return {"n": n, "reference_value": km_median(sr, cr)[0], "control_value": km_median(sc, cc)[0],
            "solved_reference": f"{int((~cr).sum())}/{n}", "solved_control": f"{int((~cc).sum())}/{n}",
            "effect": ratio, "ci_low": low, "ci_high": high, "p": p, "p_sign": p_sign,
            "p_min": min_logrank_p(n, n), "direction": z, "both_at_chance": both_chance,
            "test": TESTS["time_to_solve"], "equivalence": RATIO_BOUNDS}


def _accuracy(pair: pd.DataFrame, col: str, task: str, seed: int) -> dict:
    pair = pair[pair[f"{col}_r"].notna() & pair[f"{col}_c"].notna()]
    n = len(pair)
    r, c = pair[f"{col}_r"].to_numpy(float), pair[f"{col}_c"].to_numpy(float)
    d = c - r
    both_chance = n > 0 and at_chance(r.mean(), task, METRIC_COLUMNS[col]) and \
        at_chance(c.mean(), task, METRIC_COLUMNS[col])
    low, high = bootstrap_ci(d, seed=seed)
    return {"n": n, "reference_value": r.mean() if n else math.nan,
            "control_value": c.mean() if n else math.nan,
            "effect": d.mean() if n else math.nan, "ci_low": low, "ci_high": high,
            "p": sign_flip_test(d) if n else math.nan, "p_sign": math.nan,
            "p_min": min_sign_flip_p(n), "direction": d.mean() if n else 0.0, "both_at_chance": both_chance,
            "test": TESTS["accuracy"], "equivalence": (-EQUIVALENCE_MARGIN, EQUIVALENCE_MARGIN)}


def verdicts(results: pd.DataFrame, reference: str = "llama", seed: int = 0,
             seeds=sequential.FIRST_SEEDS) -> pd.DataFrame:
    """Every control-vs-reference comparison of the study with its effect, test and verdict,
    by the second edition's procedure (log-rank, bootstrap intervals) on `seeds` (the first
    ten: the seeds added later belong to `decide`; results holding none of `seeds`, such as a
    reader's own runs on other seeds, are taken whole).

    `results` is the tidy results frame (one row per measurement, run, checkpoint).
    Comparisons: "matrix" — every variant against `reference`, per task and regime;
    "length" — the same on 8- and 12-pair accuracy, from the recall runs (each run once);
    "sweep" — each RoPE base against 10,000; "alphabet" — answer `copy` against `name`
    for each variant. Rows are paired by seed; only seeds present in both rows count (`n`).

    Metrics (fixed in advance, see `MEASUREMENT_METRICS`):

    - `time_to_solve`: effect = ratio of Kaplan–Meier medians control / reference (< 1:
      the control solves sooner; inf / 0 / NaN when one or both medians are undefined,
      see `median_ratio_ci`) with a paired bootstrap interval; `p` is the log-rank test
      (the verdict test), `p_sign` the paired censoring-aware sign test, reported only.
      `reference_value`/`control_value` are the medians, `solved_*` the k/n solved.
    - `test_acc@<checkpoint>` (and `_8`, `_12`): effect = mean per-seed difference control −
      reference, bootstrap interval, exact sign-flip p; the values are the row means.

    Holm runs within each family (measurement × task × regime × metric). `p_min` is the
    smallest p the test could give with these seeds; `reachable` says whether it passes
    the first Holm step (p_min < 0.05 / family size). A comparison that cannot reach the
    level is never `better` or `worse`. See `verdict` for the order of the rules.
    """
    keep = results.seed.isin(seeds)
    results = results[keep] if keep.any() else results
    rows = _metric_rows(results, reference, seed)
    if not rows:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    return _holm_verdicts(pd.DataFrame(rows))


VERDICT_COLUMNS = ["measurement", "comparison", "task", "regime", "metric", "reference", "control", "n",
                   "reference_value", "control_value", "solved_reference", "solved_control", "effect",
                   "ci_low", "ci_high", "p", "p_holm", "p_sign", "p_min", "family_size", "reachable", "test",
                   "verdict"]


def _no_pair(metric: str) -> dict:
    """A comparison with no seed in both rows: nothing measured, nothing decidable."""
    return {"n": 0, "p": math.nan, "p_min": 1.0, "both_at_chance": False, "direction": 0.0,
            "effect": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_sign": math.nan,
            "test": TESTS["time_to_solve" if metric == "time_to_solve" else "accuracy"],
            "equivalence": (0.0, 0.0)}


def _metric_rows(results: pd.DataFrame, reference: str, seed: int) -> list[dict]:
    """One row per comparison and metric: its effect, interval and test, before Holm (`verdicts`)."""
    rows = []
    for measurement, task, regime, label, rlab, clab, ref, ctl in _comparisons(results, reference):
        pair = _paired(ref, ctl)
        if len(pair):
            checkpoint = int(pair.checkpoint_r.iloc[0])
        else:
            checkpoint = int(results.loc[results["final"].astype(bool), "step"].max())
        for metric in MEASUREMENT_METRICS[measurement]:
            if metric == "time_to_solve":
                row = _time_to_solve(pair, task, seed) if len(pair) else None
                name = metric
            else:
                row = _accuracy(pair, metric, task, seed) if len(pair) else None
                name = f"{metric}@{checkpoint}"
            if row is None:
                row = _no_pair(metric)
            rows.append({"measurement": measurement, "comparison": label, "task": task, "regime": regime,
                         "metric": name, "reference": rlab, "control": clab, **row})
    return rows


def _holm_verdicts(df: pd.DataFrame) -> pd.DataFrame:
    """Holm within each family (measurement × task × regime × metric), whether the first Holm
    step is reachable, and each row's verdict; the columns of `verdicts`, in order."""
    family = ["measurement", "task", "regime", "metric"]
    df["p_holm"] = df.groupby(family, sort=False)["p"].transform(lambda p: pd.Series(holm(p), index=p.index))
    df["family_size"] = df.groupby(family, sort=False)["p"].transform(lambda p: int(p.notna().sum()))
    df["reachable"] = (df.p_min * df.family_size.clip(lower=1)) < ALPHA
    df["verdict"] = [verdict(both_at_chance=r.both_at_chance, p_holm=r.p_holm, reachable=r.reachable,
                             direction=r.direction, ci_low=r.ci_low, ci_high=r.ci_high,
                             equivalence=r.equivalence) for r in df.itertuples()]
    for c in VERDICT_COLUMNS:
        if c not in df:
            df[c] = np.nan
    return df[VERDICT_COLUMNS].reset_index(drop=True)


TEST_NAMES = {TESTS["time_to_solve"]: "log-rank", TESTS["accuracy"]: "sign-flip"}


# ---------------------------------------------------------------- what a chapter shows

def study_verdicts(results: pd.DataFrame | None = None) -> pd.DataFrame:
    """`verdicts` on the results a chapter read (default: the committed study).

    Pass every row the chapter loaded, not only its own variants, so each Holm family
    is the study's: filter afterwards with `select`.
    """
    if results is None:
        from .study import load_results

        results = load_results()
    return verdicts(results)


def metric_base(metric: str) -> str:
    """A verdict's metric without its checkpoint: 'test_acc@1200' -> 'test_acc'."""
    return metric.split("@", 1)[0]


def select(v: pd.DataFrame, *, measurement: str | None = None, controls=None, tasks=None,
           regimes=None, metrics=None) -> pd.DataFrame:
    """The verdict rows a chapter shows. `controls` are control labels (variant names,
    `rope_theta=100`, `llama copy`), `metrics` base names (`test_acc`, not `test_acc@1200`).
    An empty result is an error: a chapter asking for rows the study lacks is a typo."""
    keep = pd.Series(True, index=v.index)
    for col, want in (("measurement", measurement), ("control", controls), ("task", tasks),
                      ("regime", regimes)):
        if want is not None:
            want = [want] if isinstance(want, str) else list(want)
            keep &= v[col].isin(want)
    if metrics is not None:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
        keep &= v.metric.map(metric_base).isin(metrics)
    out = v[keep]
    if out.empty:
        raise ValueError(f"no verdict for measurement={measurement!r}, controls={controls!r}, "
                         f"tasks={tasks!r}, regimes={regimes!r}, metrics={metrics!r}; the study "
                         f"has controls {sorted(v.control.unique())}")
    return out


def verdict_row(v: pd.DataFrame, control: str, task: str, regime: str, metric: str,
                measurement: str | None = None) -> pd.Series:
    """Exactly one verdict row (an error if the selection is empty or ambiguous)."""
    out = select(v, measurement=measurement, controls=control, tasks=task, regimes=regime,
                 metrics=metric)
    if len(out) != 1:
        raise ValueError(f"{len(out)} verdict rows for {control}/{task}/{regime}/{metric}; "
                         f"name the measurement ({sorted(out.measurement.unique())})")
    return out.iloc[0]


def effect_text(row) -> str:
    """The effect with its 95 % interval, in the metric's unit: a median ratio '×0.38
    [0.31, 0.50]' for time to solve (below 1: the control solves sooner), a paired gap
    in accuracy points '+48.2 [+25.6, +74.2]' otherwise."""
    if metric_base(row.metric) == "time_to_solve":
        def r(x):
            return "∞" if math.isinf(x) else ("–" if math.isnan(x) else f"{x:.2f}")
        return f"×{r(row.effect)} [{r(row.ci_low)}, {r(row.ci_high)}]"
    if math.isnan(row.effect):
        return "–"
    return f"{100 * row.effect:+.1f} [{100 * row.ci_low:+.1f}, {100 * row.ci_high:+.1f}]"


def p_text(p: float) -> str:
    """A p-value for a table: three decimals, or '< 0.001'."""
    if p is None or math.isnan(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def verdict_table(v: pd.DataFrame, **selection) -> pd.DataFrame:
    """The verdicts for the page: one row per comparison × (task, data) × metric with the
    verdict first (a table wider than the text column scrolls, and the verdict is what a
    reader looks for), then the two rows' values (reference → control: median steps to
    solve and seeds solved, or mean accuracy), the effect and its interval, the
    Holm-adjusted p and the test. `selection` as in `select`."""
    rows = select(v, **selection) if selection else v
    out = []
    for r in rows.itertuples():
        if metric_base(r.metric) == "time_to_solve":
            values = (f"{steps_text(r.reference_value)} → {steps_text(r.control_value)} "
                      f"({r.solved_reference} → {r.solved_control} solved)")
        else:
            values = f"{100 * r.reference_value:.1f}% → {100 * r.control_value:.1f}%"
        base, _, at = r.metric.partition("@")
        out.append({"comparison": r.comparison, "task, data": f"{r.task}, {r.regime}",
                    "metric": METRIC_LABELS.get(base, base) + (f" @{int(at):,}" if at else ""),
                    "verdict": r.verdict, "reference → control": values,
                    "effect [95% CI]": effect_text(r), "p (Holm)": p_text(r.p_holm),
                    "test": TEST_NAMES.get(r.test, r.test)})
    return pd.DataFrame(out).set_index(["comparison", "task, data", "metric"])


def verdict_counts(v: pd.DataFrame) -> pd.DataFrame:
    """How many comparisons each regime decides, which way: regime × verdict counts."""
    counts = v.groupby(["regime", "verdict"]).size().unstack(fill_value=0)
    return counts.reindex(columns=[c for c in VERDICTS if c in counts.columns]
                          + [c for c in counts.columns if c not in VERDICTS])


# ---------------------------------------------------------------- solve rates

def runs(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run (see `runs_table`): time to solve and the accuracies."""
    return runs_table(results)


def solve_table(results: pd.DataFrame, variants, tasks=("addition", "recall"),
                regimes=REGIMES) -> pd.DataFrame:
    """Per variant × task × regime: runs solved k/n with the Clopper–Pearson interval,
    and the Kaplan–Meier median step to solve with its interval ('never' when fewer than
    half solve by the cap). Rows the results lack are left out."""
    r = runs(results)
    out = []
    for task in tasks:
        for regime in regimes:
            for variant in variants:
                g = variant_rows(r, variant, task, regime)
                if g.empty:
                    continue
                k, n = int((~g.censored).sum()), len(g)
                rate, lo, hi = stats.solve_rate(k, n)
                med, mlo, mhi = stats.km_median(g.time, g.censored)
                out.append({"variant": variant, "task": task, "regime": regime,
                            "solved": f"{k} of {n}", "solve rate [95% CI]":
                            f"{100 * rate:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]",
                            "median step to solve [95% CI]":
                            f"{steps_text(med)} [{steps_text(mlo)}, {steps_text(mhi)}]",
                            "k": k, "n": n, "median": med})
    if not out:
        raise ValueError(f"no runs of {list(variants)} on {list(tasks)} in {list(regimes)}")
    return pd.DataFrame(out).set_index(["task", "regime", "variant"])


def solve_counts(table: pd.DataFrame, task: str, regime: str, variant: str) -> tuple[int, int, float]:
    """One row of a `solve_table` for prose: (seeds solved, seeds, Kaplan–Meier median step
    to solve); the median is inf when fewer than half the seeds solve by the cap."""
    row = table.loc[(task, regime, variant)]
    return int(row.k), int(row.n), float(row["median"])


def solve_rows(groups: dict, index_name: str = "row") -> pd.DataFrame:
    """`solve_table` for rows that are not a variant's reference configuration (a RoPE
    base, an answer formulation): `groups` maps a label to that row's runs (`runs`).
    Columns as in `solve_table`; an empty group is an error."""
    out = []
    for label, g in groups.items():
        if g.empty:
            raise ValueError(f"no runs for the row {label!r}")
        censored = g.censored.astype(bool)
        k, n = int((~censored).sum()), len(g)
        rate, lo, hi = stats.solve_rate(k, n)
        med, mlo, mhi = stats.km_median(g.time, censored)
        out.append({index_name: label, "solved": f"{k} of {n}",
                    "solve rate [95% CI]": f"{100 * rate:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]",
                    "median step to solve [95% CI]":
                    f"{steps_text(med)} [{steps_text(mlo)}, {steps_text(mhi)}]",
                    "k": k, "n": n, "median": med})
    return pd.DataFrame(out).set_index(index_name)


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


# ---------------------------------------------------------------- p-values in prose

def p_phrase(p: float) -> str:
    """A p-value after 'p' in a sentence: '= 0.012', '< 0.001', or '–' when there is none."""
    text = p_text(p)
    return text if text.startswith("<") or text == "–" else f"= {text}"


def p_range(ps) -> str:
    """Several p-values for prose as their range, 'lo to hi' in `p_text`'s form ('0.061 to
    0.140'); one value when both ends read alike; '–' when there are none."""
    ps = [float(p) for p in ps]
    if not ps:
        return "–"
    lo, hi = p_text(min(ps)), p_text(max(ps))
    return lo if lo == hi else f"{lo} to {hi}"


# ---------------------------------------------------------------- how much one seed weighs

LEAVE_ONE_OUT_FIELDS = ("ci_high", "ci_low", "effect", "n", "p", "p_holm", "verdict")  # sorted: see below


def leave_one_out(results: pd.DataFrame, control: str, task: str, regimes=REGIMES,
                  metrics=("time_to_solve", "test_acc"), *, measurement: str | None = None,
                  seeds=None) -> pd.DataFrame:
    """One control's verdicts decided again with each seed left out: a verdict that changes
    when one seed goes is one seed from the line.

    For each seed of `seeds` (default: every seed `verdicts` decides on, in order) all of
    that seed's runs are dropped, from every row, so each Holm family is still the study's
    less that seed, and `verdicts` decides again; nothing else changes. `regimes` and `metrics`
    (base names, as in `select`) say which of the control's verdict rows are kept.

    One row per left-out seed (index `left_out`, in the order of `seeds`); columns
    (regime, metric, field) for each field of `LEAVE_ONE_OUT_FIELDS`, so that
    `loo["finite", "time_to_solve"]` is a frame of the verdict, p after Holm, effect ...
    with each seed left out. With no seeds to leave out the frame is empty, its columns
    the same."""
    regimes = [regimes] if isinstance(regimes, str) else list(regimes)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if seeds is None:  # the seeds `verdicts` reads: its first ten, or all when it holds none of them
        first = results.seed.isin(sequential.FIRST_SEEDS)
        seeds = sorted((results[first] if first.any() else results).seed.unique())
    seeds = list(seeds)
    rows = {}
    for seed in seeds:
        without = verdicts(results[results.seed != seed])
        rows[seed] = {(r, m, f): verdict_row(without, control, task, r, m, measurement)[f]
                      for r in regimes for m in metrics for f in LEAVE_ONE_OUT_FIELDS}
    columns = pd.MultiIndex.from_product([regimes, metrics, LEAVE_ONE_OUT_FIELDS],
                                         names=["regime", "metric", "field"])
    out = pd.DataFrame([rows[s] for s in seeds], index=pd.Index(seeds, name="left_out"),
                       columns=columns)
    return out.sort_index(axis=1)  # sorted columns: selecting (regime, metric) warns otherwise


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
    "prob_better_low", "prob_better_high", "seeds_needed", "reference_arm", "control_arm"]


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
    return (first.task, first.variant, first.regime, float(first.rope_theta), first.answer)


def _both_at_chance(pair: pd.DataFrame, ep: Endpoint, task: str) -> bool:
    if ep.name == "speed":
        nobody = bool(pair.censored_r.all() and pair.censored_c.all())
        return nobody and at_chance(pair.stop_acc_r.mean(), task) and at_chance(pair.stop_acc_c.mean(), task)
    return at_chance(pair[f"{ep.column}_r"].mean(), task, ep.n_pairs) and \
        at_chance(pair[f"{ep.column}_c"].mean(), task, ep.n_pairs)


def _one_comparison(pair: pd.DataFrame, ep: Endpoint, task: str) -> dict:
    """Everything about one comparison that does not depend on the rest of its family."""

    pair = pair[pair[f"{ep.column}_r"].notna() & pair[f"{ep.column}_c"].notna()]
    first_pairs = pair[pair.seed.isin(sequential.FIRST_SEEDS)]
    added_pairs = pair[pair.seed.isin(sequential.ADDED_SEEDS)]
    chance = _both_at_chance(first_pairs, ep, task)
    first = _units(first_pairs, ep)
    pending = False
    if ep.first_seeds_only:
        used, added, stopped = first_pairs, None, "secondary: the first 10 seeds only"
    else:
        go_on, stopped = sequential.continues(first, both_at_chance=chance,
                                              margin=(-ep.margin / ep.unit, ep.margin / ep.unit))
        # Stage 2 counts only once all its seeds are in: a look at part of it would be a
        # third look the design does not pay for. Until then the row shows stage 1.
        planned = len(sequential.ADDED_SEEDS)
        pending = go_on and len(added_pairs) < planned
        added = _units(added_pairs, ep) if go_on and not pending else None
        used = pd.concat([first_pairs, added_pairs]) if added is not None else first_pairs
        if pending:
            stopped = f"undecided on the first 10 seeds: {len(added_pairs)} of {planned} added seeds so far"
    d_all = _units(used, ep) * ep.unit
    r, c = used[f"{ep.column}_r"].to_numpy(float), used[f"{ep.column}_c"].to_numpy(float)
    wins = (d_all > 0) if ep.higher_is_better else (d_all < 0)
    score = float(wins.sum() + 0.5 * (d_all == 0).sum())
    low, high = stats.wilson_interval(score, len(used)) if len(used) else (math.nan, math.nan)
    reference_value = float(np.exp(np.log(r).mean())) if ep.log else float(r.mean())
    control_value = float(np.exp(np.log(c).mean())) if ep.log else float(c.mean())
    return {"n": len(used), "reference_value": reference_value, "control_value": control_value,
            "p": sequential.p_value(first, added), "both_at_chance": chance, "stopped": stopped,
            "_pending": (not ep.first_seeds_only) and pending,
            "prob_better": score / len(used) if len(used) else math.nan, "prob_better_low": low,
            "prob_better_high": high, "_first": first, "_added": added, "_bounds": _bounds(ep, pair),
            "_sd": float(d_all.std(ddof=1)) if len(d_all) > 1 else math.nan,
            "test": FIXED_TEST if ep.first_seeds_only else DESIGN_TEST}


def _finish(row: dict, ep: Endpoint) -> dict:
    """The interval at the row's Holm level, and the verdict read off it."""

    lo, hi = sequential.interval(row["_first"], row["_added"], row["level"], row["_bounds"])
    centre = sequential.estimate(row["_first"], row["_added"], row["_bounds"], (lo, hi))
    m = ep.margin / ep.unit
    if row["both_at_chance"]:
        verdict = "both at chance"
    elif lo > 0 or hi < 0:
        control_higher = lo > 0
        verdict = "better" if control_higher == ep.higher_is_better else "worse"
    elif -m < lo and hi < m:
        verdict = "equivalent"
    else:
        verdict = "undecided"
    scale = (lambda k: math.exp(k * ep.unit)) if ep.log else (lambda k: k * ep.unit)
    needed = math.nan
    if verdict == "undecided":
        needed = stats.seeds_for_power(centre * ep.unit, row["_sd"], row["level"])
    return {"effect": scale(centre), "ci_low": scale(lo), "ci_high": scale(hi),
            "margin_low": scale(-m), "margin_high": scale(m), "verdict": verdict, "seeds_needed": needed}


def decide(results: pd.DataFrame, reference: str = "llama") -> pd.DataFrame:
    """Every comparison of the study decided on the endpoints fixed in `QUESTIONS`.

    Per comparison: the paired per-seed differences; stage 1 (seeds 0–9) and, where the
    rule of `sequential.continues` sent it on, the added seeds; the design's exact p; Holm
    within each family (measurement × task × regime × endpoint), which gives each row the
    level it is tested at (`level`); the interval of the effect inverted from the same test
    at that level; and the verdict read off the interval (`better`/`worse` when it excludes
    no difference, `equivalent` when it lies inside the margin, `both at chance`,
    `undecided`). The effect is the test's median-unbiased estimate (`sequential.estimate`,
    inside its interval): for speed a ratio control / reference of the restricted time to
    solve (below 1 the control learns sooner), for accuracy a difference. `prob_better` is
    the chance the control beats the reference on a new seed (ties half), with a Wilson
    interval; `seeds_needed` the seeds per arm for 80 % power at
    the observed effect, for an undecided row. A family in which every row is at chance is
    one row, verdict `not learned`.
    """
    rows = []
    for measurement, task, regime, label, rlab, clab, ref, ctl in _comparisons(results, reference):
        pair = _paired(ref, ctl)
        if pair.empty:
            continue
        for ep in QUESTIONS[measurement]:
            row = _one_comparison(pair, ep, task)
            rows.append({"measurement": measurement, "comparison": label, "task": task, "regime": regime,
                         "metric": ep.name, "primary": ep.primary, "reference": rlab, "control": clab,
                         "reference_arm": _arm(ref), "control_arm": _arm(ctl), **row})
    if not rows:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    df = pd.DataFrame(rows)
    family = ["measurement", "task", "regime", "metric"]
    # A row still waiting for its added seeds holds its place in the family with p = 1
    # (it cannot make another row's step easier) and is shown at the stage-1 level, where
    # the rule that sent it on says its interval neither excludes 0 nor fits the margin.
    holm_p = df.p.where(~df._pending, 1.0)
    df["level"] = holm_p.groupby([df[c] for c in family], sort=False).transform(
        lambda p: pd.Series(stats.holm_levels(p), index=p.index))
    df["p_holm"] = holm_p.groupby([df[c] for c in family], sort=False).transform(
        lambda p: pd.Series(holm(p), index=p.index)).where(~df._pending)
    df.loc[df._pending, "level"] = sequential.ALPHA_FIRST
    finished = [_finish(r, ENDPOINTS[r["metric"]]) for r in df.to_dict("records")]
    df = pd.concat([df, pd.DataFrame(finished, index=df.index)], axis=1)
    return _not_learned(df[DECISION_COLUMNS + ["both_at_chance"]], family)


def _not_learned(df: pd.DataFrame, family: list[str]) -> pd.DataFrame:
    """A family whose every comparison is at chance becomes one row: nothing learned it."""
    out = []
    for _, g in df.groupby(family, sort=False):
        if len(g) > 1 and g.both_at_chance.all():
            first = g.iloc[0].copy()
            first["comparison"], first["control"] = "every control", "every control"
            first["verdict"], first["stopped"] = "not learned", "no row learns within the cap"
            for c in ("effect", "ci_low", "ci_high", "p", "p_holm", "prob_better", "prob_better_low",
                      "prob_better_high", "seeds_needed", "control_value"):
                first[c] = math.nan
            out.append(first.to_frame().T)
        else:
            out.append(g)
    return pd.concat(out).drop(columns="both_at_chance").reset_index(drop=True)


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
    when it is worse, and inside the margin without excluding it exactly when equivalent."""
    ep = ENDPOINTS[row.metric]
    null = 1.0 if ep.log else 0.0
    above, below = row.ci_low > null, row.ci_high < null
    better = above if ep.higher_is_better else below
    worse = below if ep.higher_is_better else above
    inside = row.margin_low < row.ci_low and row.ci_high < row.margin_high
    return better == (row.verdict == "better") and worse == (row.verdict == "worse") and \
        (inside and not (above or below)) == (row.verdict == "equivalent")
