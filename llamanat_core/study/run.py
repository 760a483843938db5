"""One training run of the study, whatever it measures: a small frozen record.

A run is (task, variant, seed, Config overrides, budget, compile flag) and the fields its
task adds: the answer formulation of a puzzle (`addition`, `recall`), the learning-rate
scale and the model size of a text run. A new measurement is a task value and the fields
it needs, not a new class. The run's key is a hash of its `record()` (which names its
trainer's version), so a run shared between measurements is trained once, and a trainer
that computes different numbers never reuses an old file. A field at its old default is
left out of the record, so adding a field keeps every existing key.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..data.corpus import SHA256
from ..data.text import VOCAB_SIZE
from ..model.config import SIZES, VARIANTS, variant_config
from ..train.loop import Budget, TaskSpec, budget_dict
from ..train.text import TextBudget, text_budget_dict

# Bump whenever a change to the model, the tasks or the trainer alters any number a
# puzzle run produces; tests/test_study.py holds a short fit's losses against VERSION_FINGERPRINT.
STUDY_VERSION = 4  # 4: the whole step in one compiled graph
# The first training losses of `plan.fingerprint_run()` under the plain (eager) loop.
VERSION_FINGERPRINT = (4.0461898, 3.7766888, 3.6287496, 3.4784067, 3.428509, 3.3295166,
                       3.2372139, 3.1514254, 3.108516, 3.0302725, 2.9749606, 2.8752725)
# Bump whenever a change to the model, the corpus reading or the text trainer alters
# any number a text run produces.
TEXT_VERSION = 1
CORPUS_DIGEST = hashlib.sha256(json.dumps(SHA256, sort_keys=True).encode()).hexdigest()[:16]

PUZZLES = ("addition", "recall")
TASKS = PUZZLES + ("text",)
EXTRAPOLATE = (8, 12)  # every recall run is also scored, unchanged, at these lengths
SEEDS = tuple(range(10))  # the first ten seeds of every row
WEIGHT_VARIANTS = ("llama", "abs_pos")  # puzzle weights kept (finite regime, every seed of SEEDS)
TEXT_KEPT = {("llama", ()), ("abs_pos", ())}  # text weights kept by default (seed 0, 1× rate)


def version_of(task: str) -> int:
    """The trainer version a run of `task` records: the puzzles' or the text trainer's."""
    return TEXT_VERSION if task == "text" else STUDY_VERSION


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


# Each field that applies to some tasks only: its default where it applies. Left at None
# it takes that default; set for a task it does not apply to, it is a ValueError.
TASK_FIELDS = {
    "answer": (PUZZLES, "name"),
    "lr_scale": (("text",), 1.0),
    "size": (("text",), "S"),
}


@dataclass(frozen=True)
class Run:
    """One training run: task, variant, seed, Config overrides (sorted (field, value)
    pairs), the answer formulation (puzzles), budget (`Budget` for a puzzle, `TextBudget`
    for text), whether its step is compiled (puzzles by default, text not), the
    learning-rate scale and the model size (text). `keep_weights` overrides whether its
    trained weights are kept (a plan's choice: not part of the record). Its `key` (a hash
    of the record) names its run file."""
    task: str
    variant: str
    seed: int
    overrides: tuple = ()
    answer: str | None = None
    budget: Budget | TextBudget | None = None
    compile: bool | None = None  # compiled and eager round differently: part of the record
    lr_scale: float | None = None
    size: str | None = None
    keep_weights: bool | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose one of {list(TASKS)}")
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {sorted(VARIANTS)}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name, (tasks, default) in TASK_FIELDS.items():
            value = getattr(self, name)
            if self.task not in tasks and value is not None:
                raise ValueError(f"{name} applies to {' and '.join(tasks)} runs only, not {self.task}")
            if self.task in tasks and value is None:
                object.__setattr__(self, name, default)
        self._set_budget()
        if self.compile is None:
            object.__setattr__(self, "compile", self.task != "text")
        if self.task == "text":
            self._check_text()
        # Drop overrides equal to the run's own value so shared runs hash alike.
        base = self._config({})
        kept = tuple(sorted((k, v) for k, v in self.overrides if getattr(base, k) != v))
        object.__setattr__(self, "overrides", kept)

    def _set_budget(self) -> None:
        kind = TextBudget if self.task == "text" else Budget
        if self.budget is None:
            object.__setattr__(self, "budget", kind())
        elif not isinstance(self.budget, kind):
            raise ValueError(f"budget of a {self.task} run must be a {kind.__name__}, "
                             f"got {type(self.budget).__name__}")

    def _check_text(self) -> None:
        if not self.lr_scale > 0:
            raise ValueError(f"lr_scale must be positive, got {self.lr_scale!r}")
        if round(self.budget.lr / self.lr_scale, 12) != TextBudget().lr:
            raise ValueError("budget: build a text run's budget with TextBudget.for_steps(steps, lr_scale)")
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, got {self.size!r}")

    def _config(self, overrides: dict):
        if self.task == "text":
            return variant_config(self.variant, size=self.size, vocab_size=VOCAB_SIZE, **overrides)
        return variant_config(self.variant, **overrides)

    @property
    def config(self):
        return self._config(dict(self.overrides))

    @property
    def regime(self) -> str:
        return "text" if self.task == "text" else self.budget.regime

    @property
    def spec(self) -> TaskSpec:
        """The puzzle a puzzle run trains on (no text run has one)."""
        if self.task not in PUZZLES:
            raise ValueError(f"a {self.task} run has no puzzle TaskSpec")
        extra = EXTRAPOLATE if self.task == "recall" else ()
        return TaskSpec(self.task, 4, self.answer if self.task == "recall" else "name", extra)

    @property
    def keeps_weights(self) -> bool:
        """Whether the trained weights are kept, for chapters that look inside a model:
        the plan's choice where it made one; else, for puzzles, the reference and the
        learned table, both tasks, seeds 0-9, finite regime, name answers; for text, the
        same two arms at seed 0 and the reference rate."""
        if self.keep_weights is not None:
            return self.keep_weights
        if self.task == "text":
            return (self.variant, self.overrides) in TEXT_KEPT and self.seed == 0 and self.lr_scale == 1.0
        return (self.variant in WEIGHT_VARIANTS and self.regime == "finite" and self.seed in SEEDS
                and not self.overrides and self.spec.answer == "name")

    def record(self) -> dict:
        """What the key hashes: the run's fields, its trainer's version and (text) the
        corpus's digest. A text field at its old default is left out, so old keys stay."""
        head = {"version": version_of(self.task), "task": self.task, "variant": self.variant,
                "seed": self.seed, "overrides": [list(o) for o in self.overrides]}
        if self.task == "text":
            return {**head, "lr_scale": self.lr_scale, "budget": text_budget_dict(self.budget),
                    "corpus": CORPUS_DIGEST, **({"size": self.size} if self.size != "S" else {}),
                    **({"compile": True} if self.compile else {})}
        return {**head, "answer": self.spec.answer, "extrapolate": list(self.spec.extrapolate),
                "budget": budget_dict(self.budget), "compile": self.compile}

    @property
    def key(self) -> str:
        return record_key(self.record())

    @property
    def label(self) -> str:
        if self.task == "text":
            extra = "".join(f" {k}={v:g}" for k, v in self.overrides)
            rate = f" lr×{self.lr_scale:g}" if self.lr_scale != 1.0 else ""
            size = f" size={self.size}" if self.size != "S" else ""
            tuned = " tuned" if self.budget.decay != "all" else ""  # the tuned study's recipe
            return f"{self.variant} text{tuned}{size}{extra}{rate} seed={self.seed}"
        extra = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
                        for k, v in self.overrides)
        answer = f" answer={self.answer}" if self.task == "recall" and self.answer != "name" else ""
        return f"{self.variant} {self.task} {self.regime}{extra}{answer} seed={self.seed}"


def run_from_record(record: dict, strict: bool = True) -> Run:
    """The run a stored record describes. `strict`: a record no run writes (a field at a
    default it leaves out, overrides out of order) is a ValueError; otherwise the run
    that trains as the record says (`llamanat verify` re-fits a record as written)."""
    task, fields = record.get("task"), {"overrides": tuple(map(tuple, record.get("overrides", ())))}
    budget = dict(record.get("budget", {}))
    try:
        if task == "text":
            budget["longer"] = tuple(budget.get("longer", ()))
            fields |= {"budget": TextBudget(**budget), "lr_scale": record.get("lr_scale"),
                       "size": record.get("size"), "compile": record.get("compile", False)}
        else:
            budget["checkpoints"] = tuple(budget.get("checkpoints", ()))
            fields |= {"budget": Budget(**budget), "answer": record.get("answer"),
                       "compile": record.get("compile")}
    except TypeError as e:  # a field no budget has
        raise ValueError(f"budget of the record is not one a run writes: {e}") from None
    run = Run(task, record.get("variant"), record.get("seed"), **fields)
    if strict and run.record() != record:
        raise ValueError(f"record of {run.label} is not one a run writes: {record}")
    return run
