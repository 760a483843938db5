"""Time to solve as what it is: a censored time. A run that never reaches the solve
threshold within the cap has not solved *yet*; `min(step, cap)` ties it with a run that
solved at the cap. Here every speed row of `comparisons.decide` is read again three ways,
beside its verdict:

- **solves**: the exact McNemar test on the paired solved / not solved (only seeds where
  one arm solved and the other did not count);
- **the curves**: each arm's Kaplan–Meier estimate (`stats.kaplan_meier`), and the
  log-rank statistic with its null distribution from swapping a seed's two runs
  (`stats.paired_logrank_tails`). The stratified log-rank with each seed a stratum of two
  was the other choice; with two runs a stratum it only asks which run solved first, the
  sign test the design already runs, while the within-seed permutation keeps the log-rank's
  comparison of whole curves and the pairing's exchangeability;
- **the effect**: the ratio of restricted mean times to solve (the area under each arm's
  curve up to the cap: the expected steps spent unsolved within it), control / reference,
  with a paired bootstrap interval at the row's level. Below 1 the control solves sooner.

The tests follow the design's two stages: a row that continued combines its two stages'
one-sided p-values (`sequential.combine`), one that stopped is read on its first ten
seeds; Holm within the same families as `decide`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import comparisons, sequential, stats
from .paired import read_interval

FAMILY = ["measurement", "task", "regime"]


def _arrays(pair: pd.DataFrame, side: str) -> tuple[np.ndarray, np.ndarray]:
    """(time to solve or the cap, solved) of one arm's runs, seed order."""
    solved = ~pair[f"censored_{side}"].astype(bool).to_numpy()
    return pair[f"time_capped_{side}"].to_numpy(float), solved


def logrank_p(pair: pd.DataFrame, continued: bool) -> float:
    """Two-sided p of the paired log-rank test through the design's stages."""
    def tails(p):
        return stats.paired_logrank_tails(*_arrays(p, "c"), *_arrays(p, "r"))
    first, added = comparisons.used_pairs(pair, 10), pair[pair.seed.isin(sequential.ADDED_SEEDS)]
    up, down = tails(first)
    if continued:
        up2, down2 = tails(added)
        up, down = sequential.combine(up, up2), sequential.combine(down, down2)
    return sequential.two_sided(up, down)


def mcnemar_p(pair: pd.DataFrame, continued: bool) -> tuple[int, int, float]:
    """(control alone solved, reference alone solved, two-sided p) through the design's
    stages: each stage's exact one-sided McNemar tails, combined where the row continued."""
    def one_sided(p):
        b = int((~p.censored_c.astype(bool) & p.censored_r.astype(bool)).sum())
        c = int((p.censored_c.astype(bool) & ~p.censored_r.astype(bool)).sum())
        if b + c == 0:
            return b, c, 1.0, 1.0
        return b, c, float(stats.scipy.stats.binom.sf(b - 1, b + c, 0.5)), \
            float(stats.scipy.stats.binom.sf(c - 1, b + c, 0.5))
    b, c, up, down = one_sided(comparisons.used_pairs(pair, 10))
    if continued:
        b2, c2, up2, down2 = one_sided(pair[pair.seed.isin(sequential.ADDED_SEEDS)])
        b, c, up, down = b + b2, c + c2, sequential.combine(up, up2), sequential.combine(down, down2)
        return b, c, sequential.two_sided(up, down)
    return b, c, stats.mcnemar_exact(b, c)


def rmst_ratio(pair: pd.DataFrame, level: float, draws: int = 2000) -> tuple[float, float, float]:
    """(ratio, low, high): restricted mean time to the cap, control / reference, with the paired
    bootstrap percentile interval at 1 − level."""
    cap = float(pair.steps_r.max())
    for side in "rc":
        stats.restricted_mean(*_arrays(pair, side), cap)  # checks every run was followed to the cap
    x_c, x_r = (np.column_stack(_arrays(pair, s)) for s in "cr")
    return stats.paired_bootstrap_ratio(x_c, x_r, stats.capped_mean, level, draws)


def _row(row: pd.Series, pair: pd.DataFrame) -> dict:
    used = comparisons.used_pairs(pair, int(row.n))
    continued = int(row.n) > len(sequential.FIRST_SEEDS)
    b, c, p_mc = mcnemar_p(used, continued)
    return {"measurement": row.measurement, "comparison": row.comparison, "task": row.task,
            "regime": row.regime, "control": row.control, "n": int(row.n), "verdict": row.verdict,
            "stopped": row.stopped,
            "reference_solved": int((~used.censored_r.astype(bool)).sum()),
            "control_solved": int((~used.censored_c.astype(bool)).sum()),
            "only_control": b, "only_reference": c, "p_mcnemar": p_mc,
            "p_logrank": logrank_p(used, continued), "_pair": used, "_continued": continued}


SPEED_COLUMNS = ["measurement", "comparison", "task", "regime", "control", "n", "verdict", "stopped",
                 "reference_solved", "control_solved", "only_control", "only_reference", "p_mcnemar",
                 "p_logrank", "level_mcnemar", "level_logrank", "solves_verdict", "logrank_verdict",
                 "rmst_ratio", "rmst_low", "rmst_high", "rmst_level", "rmst_verdict"]


def speed_rows(results: pd.DataFrame, decisions: pd.DataFrame) -> pd.DataFrame:
    """Every primary speed row of `decisions` read as censored times: solves (McNemar), the
    curves (paired log-rank) and the restricted-mean ratio, each test at its Holm level
    within the row's family, each with its verdict beside the design's `verdict`."""
    pairs = comparisons.seed_pairs(results)
    rows = decisions[(decisions.metric == "speed") & decisions.primary.astype(bool)
                     & (decisions.verdict != "not learned") & ~decisions.stopped.str.contains("so far")]
    df = pd.DataFrame([_row(r, pairs[(r.measurement, r.comparison, r.task, r.regime)])
                       for r in rows.itertuples()])
    if df.empty:  # a reader's tiny run may time nothing: the columns, no rows
        return pd.DataFrame(columns=SPEED_COLUMNS)
    for test in ("mcnemar", "logrank"):
        df[f"level_{test}"] = df.groupby(FAMILY, sort=False)[f"p_{test}"].transform(
            lambda p: pd.Series(stats.holm_levels(p), index=p.index))
    out = pd.DataFrame([r | _verdicts(r) for r in df.to_dict("records")])
    return out.drop(columns=["_pair", "_continued"])


def _verdicts(r: dict) -> dict:
    """The three readings of one row at its Holm levels. The restricted-mean interval is at
    the log-rank's level (a row that stopped at ten seeds: at most the level its stop spent)."""
    solves = "no difference shown" if r["p_mcnemar"] > r["level_mcnemar"] else \
        "more solves" if r["only_control"] > r["only_reference"] else "fewer solves"
    z = float(stats.logrank_z(*_arrays(r["_pair"], "c"), *_arrays(r["_pair"], "r")))
    curves = "undecided" if r["p_logrank"] > r["level_logrank"] else "better" if z > 0 else "worse"
    level = r["level_logrank"] if r["_continued"] else min(r["level_logrank"], sequential.ALPHA_FIRST)
    ratio, low, high = rmst_ratio(r["_pair"], level)
    return {"solves_verdict": solves, "logrank_verdict": curves, "rmst_ratio": ratio, "rmst_low": low,
            "rmst_high": high, "rmst_level": level, "rmst_verdict": rmst_verdict(low, high)}


def rmst_verdict(low: float, high: float, margin: float = comparisons.SPEED.margin) -> str:
    """What the restricted-mean ratio's interval says: below 1 `better` (the control spends
    fewer steps unsolved), above 1 `worse`, inside the speed margin `equivalent`."""
    reading = read_interval(math.log(low), math.log(high), margin)
    return {"higher": "worse", "lower": "better"}.get(reading, reading)


BRANCH_OF = {"decided on the first": "decided at ten", "equivalent on the first": "equivalent at ten",
             "undecided on the first": "continued to forty"}
"""A row's `stopped` text -> the resampling check's branch (`benchmarks/sequential_design.py`)."""


def validated_branches(record: dict, coverage: float = 0.93, false: float = 0.05) -> list[str]:
    """The branches of the censored-time resampling (`survival_resampling_validation.json`)
    where the restricted-mean interval covers at least `coverage` and makes at most `false`
    false decisions, as a share of the branch's own resamples (an early-stop cell is judged
    on its own, not diluted by the others)."""
    return [b for b, c in record["branches"].items()
            if c["n"] and c["coverage"] >= coverage and c["false_in_branch"] <= false]


def censored_verdicts(rows: pd.DataFrame, branches: list[str]) -> pd.DataFrame:
    """`rows` (`speed_rows`) with the speed verdict the book reads: the restricted-mean
    ratio's where the row's branch is validated (`validated_branches`), else the design's
    capped-time verdict; `construction` says which."""
    branch = rows.stopped.map(lambda s: next((b for k, b in BRANCH_OF.items() if s.startswith(k)), ""))
    use = branch.isin(branches)
    return rows.assign(branch=branch, construction=use.map({True: "restricted mean", False: "capped time"}),
                       censored_verdict=rows.rmst_verdict.where(use, rows.verdict))
