"""What a chapter shows of the study's decisions: verdict tables, solve rates, the
memorisation gap, and the `claim` guard of every sentence in a conclusion.

The verdicts themselves are computed once, by `llamanat_core.stats.verdicts`, on the
whole study: a chapter filters them, it never re-tests (a Holm family is every control
of one task × regime × metric, so a chapter that re-tested only its own rows would get
other p-values than the closing chapter).

`claim(premise, sentence)` is how a conclusion stays true: each sentence an author
writes about the data is followed by a hidden cell asserting what the sentence rests
on. When a re-run stops supporting it, the chapter fails and names the sentence.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from . import stats

REGIMES = ("finite", "fresh")
REGIME_NAMES = {"finite": "finite set (4,000 items, reused)", "fresh": "fresh items every batch"}
METRIC_LABELS = {"time_to_solve": "time to solve", "test_acc": "accuracy",
                 "test_acc_8": "8-pair accuracy", "test_acc_12": "12-pair accuracy"}
TEST_NAMES = {stats.TESTS["time_to_solve"]: "log-rank", stats.TESTS["accuracy"]: "sign-flip"}


# ---------------------------------------------------------------- claims

class ClaimError(AssertionError):
    """A sentence of a chapter's text is no longer supported by the data."""


class ClaimWarning(UserWarning):
    """A sentence of the text that a reader's own run does not support."""


_COMMITTED_RUN = [True]  # set by the chapter's parameter check (`set_committed_run`)


def set_committed_run(committed: bool) -> None:
    """Whether the chapter now executing reads the committed study with every seed, the
    data its text was written about. `chapters.check_chapter_parameters` sets it; on any
    other run every claim warns instead of failing."""
    _COMMITTED_RUN[0] = bool(committed)


def claim(premise, sentence: str, strict: bool = True) -> None:
    """Assert the premise of one sentence of the text.

    `premise` is a bool computed from the data; `sentence` is the sentence (or its gist)
    as the reader sees it. False raises `ClaimError` quoting the sentence; with
    `strict=False` (a reader's own re-run, where the committed text need not hold), or in
    a chapter executed on other data than the committed study's every seed (see
    `set_committed_run`), it warns instead, so the reader sees which sentences their run
    does not support.
    """
    if isinstance(premise, (np.bool_, bool)):
        ok = bool(premise)
    else:
        raise TypeError(f"claim premise must be a bool, got {type(premise).__name__} "
                        f"(for the sentence {sentence!r})")
    if ok:
        return
    message = f"the text says {sentence!r}, but the data no longer support it"
    if strict and _COMMITTED_RUN[0]:
        raise ClaimError(message)
    # a fixed location: the warning text in an executed notebook must not carry the
    # kernel's temporary file name (it changes every execution)
    warnings.warn_explicit(message, ClaimWarning, filename="claim", lineno=0)


# ---------------------------------------------------------------- verdicts

def study_verdicts(results: pd.DataFrame | None = None) -> pd.DataFrame:
    """`stats.verdicts` on the results a chapter read (default: the committed study).

    Pass every row the chapter loaded, not only its own variants, so each Holm family
    is the study's: filter afterwards with `select`.
    """
    if results is None:
        from .study import load_results

        results = load_results()
    return stats.verdicts(results)


def _metric_base(metric: str) -> str:
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
        keep &= v.metric.map(_metric_base).isin(metrics)
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
    if _metric_base(row.metric) == "time_to_solve":
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
        if _metric_base(r.metric) == "time_to_solve":
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
    return counts.reindex(columns=[c for c in stats.VERDICTS if c in counts.columns]
                          + [c for c in counts.columns if c not in stats.VERDICTS])


# ---------------------------------------------------------------- solve rates

def runs(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run (see `stats.runs_table`): time to solve and the accuracies."""
    return stats.runs_table(results)


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
                g = r[(r.task == task) & (r.regime == regime) & (r.variant == variant)
                      & (r.answer == "name") & np.isclose(r.rope_theta, 10_000.0)]
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


__all__ = ["ClaimError", "ClaimWarning", "claim", "set_committed_run", "study_verdicts", "select",
           "verdict_row", "verdict_table",
           "verdict_counts", "effect_text", "p_text", "runs", "solve_table", "loss_at_stop",
           "largest_gap",
           "REGIMES", "REGIME_NAMES"]
__all__ += ["solve_rows"]
