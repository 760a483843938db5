"""Which test the next text study registers: each candidate run through the study's whole
rule on the fourth edition's own per-seed differences, moved to known truths.

Every fourth-edition text row (its `loss_end` differences, control − reference, all its
seeds, in whole `text_design.UNIT`s) becomes populations with a known answer (`TRUTHS`):
no difference (the row's residuals about its mean and their mirror image: symmetric),
the row's own shape moved to ±margin/2, ±margin and ±2·margin, and a skewed shape of the
row's spread with mean 0. Each draw resamples a whole family at once (seeds with
replacement, n_max of them per row), runs stage one at n1, continues the rows the rule
sends on, sets Holm levels within the family and reads each row's verdict and whether
its interval holds the truth, for every candidate on the same draws. The matrix family
carries the next study's ten members: the seven real rows and three stand-ins drawn from
the rows closest to the new arms (`STAND_INS`), which set Holm's levels and are not
scored.

Scored per size, candidate, branch (decided at stage one, equivalent at stage one,
continued) and branch × truth cell: coverage (of the row's interval at the level it is
read at, against the candidate's own estimand: the mean, or the population median for the
sign test) and false decisions (a decision of the wrong sign, any decision when the
estimand is 0, or equivalence claimed at or past the margin), the latter as a share of
every resample of that truth (so a cell's share is P(this branch and a false decision)),
with the conditional share within the cell beside it. `choose` applies the rule.

    python -m llamanat_core.analysis.text_design_check --draws 200 --write
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from ..paths import STUDY_DIR
from ..study import load_text_results
from ..util import atomic_write_text
from . import text_design as td
from .text_comparisons import text_differences

OUT = STUDY_DIR / "text_design_check.json"
DRAWS = 200
"""Draws per size and truth of the committed check (each a whole family of each kind)."""
SEED = 0
MIN_CELL = 50
"""A branch × truth cell counts in the rule once it holds this many resamples; smaller
cells are reported, their share too noisy to judge."""
TRUTHS = {"no difference (symmetric)": 0.0, "+margin/2": 0.5, "-margin/2": -0.5, "+margin": 1.0,
          "-margin": -1.0, "+2 margins": 2.0, "-2 margins": -2.0, "mean zero, skewed": None}
"""Each truth's mean in margins (None: the skewed shape, mean 0)."""
STAND_INS = {"mha_matched": "mha", "geglu": "bias", "silu_mlp": "gelu_mlp"}
"""Each new matrix arm's stand-in row in the check (not scored)."""
BRANCHES = ("decided at stage one", "equivalent at stage one", "continued")
LOOK_BRANCH = {"decided": BRANCHES[0], "equivalent": BRANCHES[1], "continue": BRANCHES[2]}


def mean_zero(d: np.ndarray) -> np.ndarray:
    """Integer values moved to mean 0 exactly: rounded residuals, the rounding left over
    taken off the largest one."""
    p = np.round(d - d.mean()).astype(np.int64)
    p[np.argmax(np.abs(p))] -= int(p.sum())
    return p


def skewed(residuals: np.ndarray) -> np.ndarray:
    """A right-skewed shape with the row's spread and mean 0: exp of the standardised
    residuals, standardised again and scaled back."""
    sd = residuals.std()
    y = np.exp(residuals / sd)
    return mean_zero((y - y.mean()) / y.std() * sd)


def median_of(pop: np.ndarray) -> float:
    """The population's median: the middle of its median set."""
    s, n = np.sort(pop), len(pop)
    return float(s[n // 2]) if n % 2 else float(s[n // 2 - 1] + s[n // 2]) / 2


def populations(d: np.ndarray, margin: int) -> dict:
    """One row's differences (whole units) at each truth of `TRUTHS`."""
    r = mean_zero(d.astype(float))
    out = {}
    for name, shift in TRUTHS.items():
        if shift is None:
            out[name] = skewed(r.astype(float))
        elif shift == 0:
            out[name] = np.concatenate([r, -r])
        else:
            out[name] = r + int(round(shift * margin))
    return out


def estimands(pop: np.ndarray) -> dict:
    return {"mean": float(pop.mean()), "median": median_of(pop)}


def fourth_edition_rows(results=None) -> dict[str, list[tuple[str, np.ndarray, bool]]]:
    """Per family of the check, (label, differences in whole units, scored?) of each row:
    the fourth edition's `loss_end` rows at the reference rate, all their seeds; the matrix
    family padded with `STAND_INS` (not scored) to the next study's ten members."""
    diffs = text_differences(load_text_results() if results is None else results)
    own = {c: np.round(g.difference.to_numpy() / td.UNIT).astype(np.int64)
           for c, g in diffs.groupby("comparison", sort=False)}
    family_of = dict(zip(diffs.comparison, diffs.family))
    matrix = [(c, d, True) for c, d in own.items() if family_of[c] == "text"]
    matrix += [(new, own[old], False) for new, old in STAND_INS.items() if old in own]
    bases = [(c, d, True) for c, d in own.items() if family_of[c] == "text_sweep"]
    return {"matrix": matrix, "bases": bases}


def false_decision(verdict: str, estimand: float, margin: float) -> bool:
    """A decision of the wrong sign (any decision at 0), or equivalence at or past the margin."""
    if verdict in ("higher", "lower"):
        return estimand == 0 or (verdict == "higher") != (estimand > 0)
    return verdict == "equivalent" and abs(estimand) >= margin


def run_family(test: str, draws: list, design: td.TwoStage, margin: int) -> tuple[list, list]:
    """One drawn family (each row's n_max differences) through the whole rule: the rows'
    decisions (`text_design.decide_family`) and the branch each took."""
    rows, branches = [], []
    for d in draws:
        first = d[:design.n1]
        look = td.first_look(test, first, design, margin)
        rows.append((first, d[design.n1:] if look == "continue" else None, look != "continue"))
        branches.append(LOOK_BRANCH[look])
    return td.decide_family(test, rows, design, margin), branches


def empty_tally() -> dict:
    return {"branches": {b: [0, 0, 0] for b in BRANCHES},
            "cells": {b: {t: [0, 0, 0] for t in TRUTHS} for b in BRANCHES},
            "by_truth": {t: {"n": 0, "right": 0, "equivalent": 0, "false": 0, "families": 0,
                             "families_with_false": 0} for t in TRUTHS}}


def score_family(tally: dict, truth: str, decisions: list, branches: list, truths: list,
                 scored: list, margin: int) -> None:
    """Add one family's scored rows to the tally: [resamples, covered, false] per branch and
    cell, and per truth the right decisions, equivalences, false decisions."""
    by_truth, any_false = tally["by_truth"][truth], False
    for dec, branch, est, keep in zip(decisions, branches, truths, scored):
        if not keep:
            continue
        covered = int(td.covers(dec["tails"], est, dec["level"]))
        false = int(false_decision(dec["verdict"], est, margin))
        right = int(est != 0 and dec["verdict"] == ("higher" if est > 0 else "lower"))
        for counts in (tally["branches"][branch], tally["cells"][branch][truth]):
            counts[0], counts[1], counts[2] = counts[0] + 1, counts[1] + covered, counts[2] + false
        by_truth["n"] += 1
        by_truth["right"] += right
        by_truth["equivalent"] += int(dec["verdict"] == "equivalent")
        by_truth["false"] += false
        any_false = any_false or bool(false)
    by_truth["families"] += 1
    by_truth["families_with_false"] += int(any_false)


def check_size(rng, design: td.TwoStage, rows: dict, draws: int, margin: int) -> dict:
    """Every candidate on the same `draws` families of each kind at each truth: the tally."""
    tally = {test: empty_tally() for test in td.CANDIDATES}
    pops = {fam: [populations(d, margin) for _, d, _ in members] for fam, members in rows.items()}
    for truth in TRUTHS:
        for _ in range(draws):
            for fam, members in rows.items():
                now = [p[truth] for p in pops[fam]]
                drawn = [pop[rng.integers(0, len(pop), design.n_max)] for pop in now]
                scored = [keep for _, _, keep in members]
                for test, (_, estimand) in td.CANDIDATES.items():
                    decisions, branches = run_family(test, drawn, design, margin)
                    truths = [estimands(pop)[estimand] for pop in now]
                    score_family(tally[test], truth, decisions, branches, truths, scored, margin)
    return tally


def rates(tally: dict) -> dict:
    """The tally with its shares: coverage per branch and cell, false decisions as a share
    of every resample of the truth (`false_rate`) and within the cell (`false_within`);
    power (right decisions at every truth but 0 and the skewed one), equivalence at 0."""
    per_truth = {t: c["n"] for t, c in tally["by_truth"].items()}
    total = sum(per_truth.values())

    def cell(counts, of):
        n, covered, false = counts
        return {"n": n, "covered": covered, "false": false,
                "coverage": covered / n if n else None, "false_within": false / n if n else None,
                "false_rate": false / of if of else None}

    out = {"branches": {b: cell(c, total) for b, c in tally["branches"].items()},
           "cells": {b: {t: cell(c, per_truth[t]) for t, c in cells.items()}
                     for b, cells in tally["cells"].items()},
           "by_truth": tally["by_truth"]}
    moved = [t for t, s in TRUTHS.items() if s]
    out["power"] = sum(tally["by_truth"][t]["right"] for t in moved) / sum(per_truth[t] for t in moved)
    zero = tally["by_truth"]["no difference (symmetric)"]
    out["equivalent_at_zero"] = zero["equivalent"] / zero["n"]
    out["family_wise_false_at_zero"] = zero["families_with_false"] / zero["families"]
    return out


def failures(summary: dict) -> list[str]:
    """Where a candidate breaks the rule at one size: every branch and every branch × truth
    cell of at least `MIN_CELL` resamples needs coverage >= the floor and false
    decisions (share of the truth's resamples) <= the ceiling."""
    out = []
    places = [(b, c) for b, c in summary["branches"].items()]
    places += [(f"{b}, {t}", c) for b, cells in summary["cells"].items() for t, c in cells.items()]
    for where, c in places:
        if c["n"] < MIN_CELL:
            continue
        if c["coverage"] < td.COVERAGE_FLOOR:
            out.append(f"{where}: coverage {c['coverage']:.3f}")
        if c["false_rate"] > td.FALSE_CEILING:
            out.append(f"{where}: false decisions {c['false_rate']:.3f}")
    return out


def choose(record: dict) -> dict:
    """The rule, per size: the candidate with the most power among those with no
    `failures`; `intervals only` when none qualifies."""
    out = {}
    for size, rec in record["sizes"].items():
        cands = rec["candidates"]
        ok = [t for t in cands if not failures(cands[t])]
        best = max(ok, key=lambda t: (cands[t]["power"], cands[t]["equivalent_at_zero"]), default=None)
        out[size] = {"test": best or "intervals only", "qualify": ok,
                     "power": {t: cands[t]["power"] for t in cands},
                     "failures": {t: failures(cands[t]) for t in cands}}
    return out


def run_check(draws: int = DRAWS, seed: int = SEED, rows: dict | None = None) -> dict:
    """The whole check: every size of `text_design.SIZES`, `draws` families per truth."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    rows = fourth_edition_rows() if rows is None else rows
    margin = int(round(td.MARGIN / td.UNIT))
    rng = np.random.default_rng(seed)
    sizes = {}
    for size, design in td.SIZES.items():
        tally = check_size(rng, design, rows, draws, margin)
        sizes[size] = {"n1": design.n1, "n_max": design.n_max, "alpha_first": design.alpha_first,
                       "candidates": {t: rates(c) for t, c in tally.items()}}
    record = {"what": "the next text study's candidate tests on the fourth edition's resampled rows "
                      "(python -m llamanat_core.analysis.text_design_check)",
              "draws": draws, "seed": seed, "min_cell": MIN_CELL, "margin_units": margin, "unit": td.UNIT,
              "coverage_floor": td.COVERAGE_FLOOR, "false_ceiling": td.FALSE_CEILING,
              "truths": TRUTHS, "stand_ins": STAND_INS,
              "rows": {fam: [[label, bool(keep), len(d)] for label, d, keep in members]
                       for fam, members in rows.items()},
              "sizes": sizes}
    record["choice"] = choose(record)
    return record


def choice_table(record: dict):
    """One line per size, candidate and branch: resamples, coverage, false decisions, with
    the candidate's power and whether it qualifies (a pandas frame)."""
    lines = []
    for size, rec in record["sizes"].items():
        picked = record["choice"][size]
        for test, c in rec["candidates"].items():
            for branch, b in c["branches"].items():
                lines.append({"size": size, "test": test, "branch": branch, "resamples": b["n"],
                              "coverage": b["coverage"], "false_rate": b["false_rate"],
                              "power": c["power"], "equivalent_at_zero": c["equivalent_at_zero"],
                              "family_wise_false_at_zero": c["family_wise_false_at_zero"],
                              "qualifies": test in picked["qualify"], "chosen": test == picked["test"]})
    return pd.DataFrame(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=DRAWS, help=f"families per size and truth ({DRAWS})")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--write", action="store_true", help=f"write the record to {OUT.name}")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    record = run_check(args.draws, args.seed)
    record["seconds"] = round(time.perf_counter() - t0, 1)
    with pd.option_context("display.width", 200, "display.max_rows", 100):
        print(choice_table(record).to_string(index=False))
    for size, c in record["choice"].items():
        print(f"{size}: {c['test']} (qualify: {', '.join(c['qualify']) or 'none'})")
        for test, why in c["failures"].items():
            print(f"  {test}: {'; '.join(why[:6]) or 'holds'}{' ...' if len(why) > 6 else ''}")
    print(f"({record['seconds']:.0f} s)")
    if args.write:
        atomic_write_text(OUT, json.dumps(record, indent=1, sort_keys=True, default=_plain) + "\n")
        print(f"written: {OUT}")
    return 0


def _plain(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")


if __name__ == "__main__":
    raise SystemExit(main())
