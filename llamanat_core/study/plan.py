"""The measurement plan: which runs the book needs, each a small frozen record.

A run is (task, variant, seed, Config overrides, answer formulation, budget incl. the
data regime, compile flag). Its key is a hash of that record plus `STUDY_VERSION`, so
a run shared between measurements (llama recall at base 10,000 sits in the matrix, the
length table, the sweep and the alphabet table) is trained once, and a trainer that
computes different numbers never reuses an old file.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from itertools import zip_longest

from ..config import MATRIX_VARIANTS, REFERENCE, VARIANTS, variant_config
from ..train import REGIMES, Budget, TaskSpec, budget_dict

# Bump whenever a change to the model, the tasks or the trainer alters any number a run
# produces; tests/test_study.py holds a short fit's losses against VERSION_FINGERPRINT.
STUDY_VERSION = 4  # 4: the whole step in one compiled graph
# The first training losses of `fingerprint_run()` under the plain (eager) loop.
VERSION_FINGERPRINT = (4.0461898, 3.7766888, 3.6287496, 3.4784067, 3.428509, 3.3295166,
                       3.2372139, 3.1514254, 3.108516, 3.0302725, 2.9749606, 2.8752725)

SEEDS = tuple(range(10))
THETAS = (10.0, 100.0, 10_000.0, 1_000_000.0)
EXTRAPOLATE = (8, 12)  # every recall run is also scored, unchanged, at these lengths
ALPHABET_VARIANTS = ("llama", "abs_pos", "untied")
WEIGHT_VARIANTS = ("llama", "abs_pos")  # trained weights kept (finite regime, every seed)
MEASUREMENTS = ("matrix", "length", "sweep", "alphabet")


@dataclass(frozen=True)
class Run:
    """One training run of the study: task, variant, seed, Config overrides, answer
    formulation, budget and whether its step is compiled. Its `key` (a hash of the record
    and STUDY_VERSION) names its run file."""
    task: str
    variant: str
    seed: int
    overrides: tuple = ()  # sorted (field, value) pairs replacing Config fields
    answer: str = "name"
    budget: Budget = field(default_factory=Budget)
    compile: bool = True  # the compiled step rounds differently from eager: part of the record

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {sorted(VARIANTS)}")
        if self.task not in ("addition", "recall"):
            raise ValueError(f"unknown task {self.task!r}; choose 'addition' or 'recall'")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        # Drop overrides equal to the variant's own value so shared runs hash alike.
        base = variant_config(self.variant)
        kept = tuple(sorted((k, v) for k, v in self.overrides if getattr(base, k) != v))
        object.__setattr__(self, "overrides", kept)

    @property
    def config(self):
        return variant_config(self.variant, **dict(self.overrides))

    @property
    def regime(self) -> str:
        return self.budget.regime

    @property
    def spec(self) -> TaskSpec:
        extra = EXTRAPOLATE if self.task == "recall" else ()
        return TaskSpec(self.task, 4, self.answer if self.task == "recall" else "name", extra)

    @property
    def keeps_weights(self) -> bool:
        """Trained weights kept for chapters that look inside a model (attention maps,
        the learned position table, cached generation): the reference and the learned
        table, both tasks, every seed, finite regime, name answers."""
        return (self.variant in WEIGHT_VARIANTS and self.regime == "finite" and self.seed in SEEDS
                and not self.overrides and self.spec.answer == "name")

    def record(self) -> dict:
        return {"version": STUDY_VERSION, "task": self.task, "variant": self.variant,
                "seed": self.seed, "overrides": [list(o) for o in self.overrides],
                "answer": self.spec.answer, "extrapolate": list(self.spec.extrapolate),
                "budget": budget_dict(self.budget), "compile": self.compile}

    @property
    def key(self) -> str:
        return record_key(self.record())

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
                        for k, v in self.overrides)
        answer = f" answer={self.answer}" if self.task == "recall" and self.answer != "name" else ""
        return f"{self.variant} {self.task} {self.regime}{extra}{answer} seed={self.seed}"


def record_key(record: dict) -> str:
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def check_seeds(seeds) -> tuple[int, ...]:
    seeds = tuple(seeds)
    if not seeds or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must not repeat, got {seeds!r}")
    return seeds


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
