"""The study's comparisons: which rows are compared, how each is decided, and what a
chapter shows of the decisions.

`verdicts(results)` pairs every control with its reference seed by seed (the matrix, the
length table, the rotation sweep, the answer alphabet), runs the tests of
`llamanat_core.stats` on each metric fixed in advance, corrects within each family
(measurement × task × regime × metric) and gives one verdict per comparison. A chapter
computes the verdicts once on the whole study (`study_verdicts`) and filters them
(`select`, `verdict_row`): it never re-tests a subset, so each Holm family is the
study's. The tables below (verdicts, solve rates, the memorisation gap) are how chapters
show them.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import stats
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
             "solve_step", "censored", "stop_step"]
    final = df[df["final"].astype(bool)]
    out = final[ident + ["step", *METRIC_COLUMNS]].rename(columns={"step": "checkpoint"})
    stop = df[df["at_stop"].astype(bool)][["run", "test_acc"]].rename(columns={"test_acc": "stop_acc"})
    out = out.merge(stop, on="run", how="left")
    censored = out["censored"].astype(bool)
    if (~censored & out["solve_step"].isna()).any():
        raise ValueError("a run is neither censored nor has a solve step")
    out["censored"] = censored
    out["time"] = np.where(censored, out["stop_step"], out["solve_step"]).astype(float)
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


def verdicts(results: pd.DataFrame, reference: str = "llama", seed: int = 0) -> pd.DataFrame:
    """Every control-vs-reference comparison of the study with its effect, test and verdict.

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
                row = {"n": 0, "p": math.nan, "p_min": 1.0, "both_at_chance": False, "direction": 0.0,
                         "effect": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_sign": math.nan,
                         "test": TESTS["time_to_solve" if metric == "time_to_solve" else "accuracy"],
                         "equivalence": (0.0, 0.0)}
            rows.append({"measurement": measurement, "comparison": label, "task": task, "regime": regime,
                         "metric": name, "reference": rlab, "control": clab, **row})
    cols = ["measurement", "comparison", "task", "regime", "metric", "reference", "control", "n",
            "reference_value", "control_value", "solved_reference", "solved_control", "effect", "ci_low",
            "ci_high", "p", "p_holm", "p_sign", "p_min", "family_size", "reachable", "test", "verdict"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    family = ["measurement", "task", "regime", "metric"]
    df["p_holm"] = df.groupby(family, sort=False)["p"].transform(lambda p: pd.Series(holm(p), index=p.index))
    df["family_size"] = df.groupby(family, sort=False)["p"].transform(lambda p: int(p.notna().sum()))
    df["reachable"] = (df.p_min * df.family_size.clip(lower=1)) < ALPHA
    df["verdict"] = [verdict(both_at_chance=r.both_at_chance, p_holm=r.p_holm, reachable=r.reachable,
                             direction=r.direction, ci_low=r.ci_low, ci_high=r.ci_high,
                             equivalence=r.equivalence) for r in df.itertuples()]
    for c in cols:
        if c not in df:
            df[c] = np.nan
    return df[cols].reset_index(drop=True)


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


def _steps(x: float) -> str:
    return "never" if math.isinf(x) else ("–" if math.isnan(x) else f"{x:,.0f}")


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
            values = (f"{_steps(r.reference_value)} → {_steps(r.control_value)} "
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
                            f"{_steps(med)} [{_steps(mlo)}, {_steps(mhi)}]",
                            "k": k, "n": n, "median": med})
    if not out:
        raise ValueError(f"no runs of {list(variants)} on {list(tasks)} in {list(regimes)}")
    return pd.DataFrame(out).set_index(["task", "regime", "variant"])


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
                    "median step to solve [95% CI]": f"{_steps(med)} [{_steps(mlo)}, {_steps(mhi)}]",
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
