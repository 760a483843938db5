"""Do the verdicts hang on the endpoints' fixed choices? The same decisions recomputed with
each choice moved, from the committed runs (no training).

- **the solve threshold**: a run solves at its first evaluation with validation accuracy
  at least 0.90; here 0.80 and 0.95, read off the dense curves. A run stops a few
  evaluations after reaching 0.90, so one that stopped without reaching 0.95 has no
  observed time at 0.95: its pairs are left out (they are counted, `unobserved`);
- **the cap**: 4,800 steps; here 2,400 (a run solving later counts as unsolved at 2,400);
- **the step of the accuracy endpoints**: each run's stop; here the fixed checkpoint
  every run reaches (1,200 steps).

`what_moves` is one table: each row whose verdict changes under any of them, with its
verdict under each. All verdicts are the corrected analysis (`comparisons.decide`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .comparisons import decide
from .decision_tables import SHORT_TITLES

THRESHOLDS = (0.8, 0.95)
SHORT_CAP = 2_400
KEY = ["measurement", "comparison", "task", "regime", "metric"]


def first_reaching(curves: pd.DataFrame, threshold: float) -> pd.Series:
    """Per run: the first evaluation step with validation accuracy >= threshold (NaN if none)."""
    return curves[curves.val_acc >= threshold].groupby("run").step.min()


def at_threshold(curves: pd.DataFrame, threshold: float):
    """A `decide(adjust=...)` map: time to solve at another accuracy threshold."""
    first = first_reaching(curves, threshold)

    def adjust(runs: pd.DataFrame) -> pd.DataFrame:
        out = runs.copy()
        step = out.run.map(first)
        reached = step.notna()
        unobserved = ~reached & (out.stop_step < out.steps)  # stopped early, never at this threshold
        out["solve_step"], out["censored"] = step, ~reached
        out["time_capped"] = np.where(reached, np.minimum(step, out.steps), out.steps).astype(float)
        out.loc[unobserved, "time_capped"] = np.nan
        return out

    return adjust


def at_cap(cap: int):
    """A `decide(adjust=...)` map: the time to solve restricted to a shorter cap."""
    def adjust(runs: pd.DataFrame) -> pd.DataFrame:
        out = runs.copy()
        solved = ~out.censored.astype(bool) & (out.solve_step <= cap)
        out["censored"] = ~solved
        out["time_capped"] = np.where(solved, out.solve_step, cap).astype(float)
        out["steps"] = cap
        return out

    return adjust


def at_checkpoint(runs: pd.DataFrame) -> pd.DataFrame:
    """A `decide(adjust=...)` map: the accuracy endpoints at the fixed checkpoint, not the stop."""
    return runs.assign(stop_acc_8=runs.test_acc_8, stop_acc_12=runs.test_acc_12)


def unobserved_runs(curves: pd.DataFrame, threshold: float) -> int:
    """Runs whose time to solve is unknown at `threshold` (stopped before reaching it)."""
    runs = curves.drop_duplicates("run").set_index("run")
    reached = first_reaching(curves, threshold).reindex(runs.index).notna()
    return int((~reached & (runs.stop_step < runs.steps)).sum())


def variants(curves: pd.DataFrame) -> dict:
    """Every sensitivity analysis by its column title, as a `decide(adjust=...)` map."""
    out = {f"solve at {t:.2f}": at_threshold(curves, t) for t in THRESHOLDS}
    out[f"cap {SHORT_CAP:,}"] = at_cap(SHORT_CAP)
    out["accuracy at 1,200 steps"] = at_checkpoint
    return out


def verdicts(results: pd.DataFrame, curves: pd.DataFrame, base: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each row's verdict as the book decides it (`as decided`) and under each variant,
    indexed by the row (measurement, comparison, task, regime, metric)."""
    base = decide(results) if base is None else base
    frames = {"as decided": base}
    for name, adjust in variants(curves).items():
        frames[name] = decide(results, adjust=adjust, with_registered=False)
    split = {name: _by_row(d) for name, d in frames.items()}
    index = pd.Index(sorted(set().union(*(rows.index for rows, _ in split.values()))), name=None)
    table = pd.DataFrame({name: rows.reindex(index) for name, (rows, _) in split.items()})
    table.index.names = KEY
    for name, (_, folded) in split.items():
        family = table.index.droplevel("comparison")
        hit = family.isin(pd.MultiIndex.from_frame(folded)) if len(folded) else np.zeros(len(table), bool)
        table.loc[hit & table[name].isna().to_numpy(), name] = "not learned"
    return table


def _by_row(decisions: pd.DataFrame) -> pd.Series:
    """Verdicts by row; a family folded into one `not learned` row gives that verdict to
    each of its comparisons, so a fold reads as what it is rather than as a missing row."""
    family = KEY[:1] + KEY[2:]
    folded = decisions[decisions.verdict == "not learned"]
    rows = decisions[decisions.verdict != "not learned"].set_index(KEY).verdict
    return rows, folded[family]


SAME = {"not learned": "both at chance"}
"""A family folded into `not learned` says of each row what `both at chance` says."""


def _moved(table: pd.DataFrame) -> pd.DataFrame:
    """Per variant and row: does the verdict differ from the book's (a missing row is `–`)?"""
    plain = table.fillna("–").replace(SAME)
    return plain.drop(columns="as decided").ne(plain["as decided"], axis=0)


def what_moves(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of `verdicts` whose verdict changes under any variant."""
    return table.fillna("–")[_moved(table).any(axis=1)]


def moved_counts(table: pd.DataFrame) -> dict:
    """Per variant, how many rows' verdicts differ from the book's."""
    return {c: int(n) for c, n in _moved(table).sum().items()}


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """`what_moves` as a reader prints it, narrow enough for the page: one label per row
    (comparison, task, regime; a RoPE base as `base 10`) and its endpoint's short title,
    then the verdicts."""
    flat = table.reset_index()
    comparison = flat.comparison.str.replace("rope_theta=", "base ", regex=False)
    label = comparison + ", " + flat.task + ", " + flat.regime
    endpoint = flat.metric.map(SHORT_TITLES).fillna(flat.metric)
    return flat.drop(columns=KEY).set_index([label.rename("comparison"), endpoint.rename("endpoint")])
