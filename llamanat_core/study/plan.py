"""The puzzles' measurement plan: which runs the book needs, each a `run.Run`.

A run shared between measurements (llama recall at base 10,000 sits in the matrix, the
length table, the sweep and the alphabet table) has one key, so it is trained once.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import zip_longest

from ..model.config import MATRIX_VARIANTS, REFERENCE
from ..train.loop import REGIMES, Budget
from .run import SEEDS, Run, check_seeds

THETAS = (10.0, 100.0, 10_000.0, 1_000_000.0)
ALPHABET_VARIANTS = ("llama", "abs_pos", "untied")
MEASUREMENTS = ("matrix", "length", "sweep", "alphabet")


def plan(only: tuple[str, ...] | None = None, seeds=SEEDS, budget: Budget = Budget(),
         compile: bool = True, regimes=REGIMES) -> dict[str, list[Run]]:
    """The measurement plan: name -> runs. A run may appear under several names.

    The matrix (every control but `untied`, both tasks) and its length table run in
    every regime of `regimes`; the rotation sweep and the answer alphabet in `finite`.
    """
    only = tuple(only or MEASUREMENTS)
    bad = [m for m in only if m not in MEASUREMENTS]
    if bad:
        raise ValueError(f"unknown measurement(s) {bad}; choose from {list(MEASUREMENTS)}")
    seeds = check_seeds(seeds)
    bad = [r for r in regimes if r not in REGIMES]
    if bad:
        raise ValueError(f"unknown regime(s) {bad}; choose from {list(REGIMES)}")
    by_regime = {r: replace(budget, regime=r) for r in regimes}
    finite = {"budget": replace(budget, regime="finite"), "compile": compile}
    out: dict[str, list[Run]] = {}
    if "matrix" in only:
        out["matrix"] = [Run(t, v, s, budget=b, compile=compile) for b in by_regime.values()
                         for t in ("addition", "recall") for v in MATRIX_VARIANTS for s in seeds]
    if "length" in only:  # train short (4 pairs), test long (8, 12): the recall runs re-scored
        out["length"] = [Run("recall", v, s, budget=b, compile=compile) for b in by_regime.values()
                         for v in MATRIX_VARIANTS for s in seeds]
    if "sweep" in only:
        out["sweep"] = [Run("recall", "llama", s, (("rope_theta", th),), **finite)
                        for th in THETAS for s in seeds]
    if "alphabet" in only:
        out["alphabet"] = [Run("recall", v, s, answer=a, **finite) for v in ALPHABET_VARIANTS
                           for a in ("name", "copy") for s in seeds]
    return out


def interleave_graphs(runs: list[Run]) -> list[Run]:
    """The runs in the order to train them: one run of every compiled graph first, then a
    second of each, and so on (eager runs keep their order, at the end).

    A compiled graph belongs to a task (its shapes) and an architecture (the rotation
    base is a buffer, not part of it). A worker compiles a graph once; a second worker
    that needs the same graph later finds it in torch's on-disk compile cache, which turns
    a 20-30 s compile into about 5. In plan order both workers would start on the same
    graph's seeds and compile it side by side. Runs are independent, so the order changes
    no number.
    """
    groups: dict = {}
    for r in runs:
        key = (r.task, r.config.replace(rope_theta=REFERENCE.rope_theta)) if r.compile else None
        groups.setdefault(key, []).append(r)
    eager = groups.pop(None, [])
    return [r for row in zip_longest(*groups.values()) for r in row if r is not None] + eager


def unique_runs(p: dict[str, list[Run]]) -> list[Run]:
    seen: dict[str, Run] = {}
    for runs in p.values():
        for r in runs:
            seen.setdefault(r.key, r)
    return list(seen.values())


def fingerprint_run() -> Run:
    """The short eager run whose first losses fingerprint STUDY_VERSION."""
    return Run("addition", "llama", 0, budget=Budget.for_steps(12), compile=False)


def arm_of(task: str, variant: str, regime: str, rope_theta: float, answer: str) -> tuple:
    """A row of the study, as the plan and the comparisons name it."""
    return (task, variant, regime, float(rope_theta), answer)


def arm(run: Run) -> tuple:
    """The row a run belongs to: (task, variant, regime, rope_theta, answer)."""
    return arm_of(run.task, run.variant, run.regime, run.config.rope_theta, run.spec.answer)


def added_seed_plan(arms, seeds, budget: Budget = Budget(), compile: bool = True) -> dict[str, list[Run]]:
    """The added `seeds` of the rows in `arms` (the two-stage design's, `sequential.py`), under
    the measurements those rows belong to, row by row: a row's seeds run together, so
    comparisons complete one after another rather than all at the end."""
    arms = set(arms)
    full = plan(seeds=seeds, budget=budget, compile=compile)
    return {m: [r for r in runs if arm(r) in arms] for m, runs in full.items()}


def merge_plans(*plans: dict[str, list[Run]]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for p in plans:
        for m, runs in p.items():
            out.setdefault(m, []).extend(runs)
    return out
