"""Do the committed numbers come from this code, on whatever CPU runs the check?

A different CPU, thread count or the compiled step round differently from the first
step on, so a bit-exact re-fit only holds on the machine that made the study. The
early trajectory does not have that problem: over the first 50 steps rounding moves
the training loss by a few 1e-6, while a real change (learning rate x 1.01, init
std x 1.01, one training item replaced) moves it by ~4e-4 or more. By steps 100-200
rounding has grown as large as those changes, so the window stays short.

How fast rounding grows depends on how far the weights move, so the window is measured
in learning rate: it ends after `VERIFY_STEPS` steps or once the steps' rates sum past
`VERIFY_LR_SUM` (what 50 puzzle steps at 1e-3 sum to), whichever comes first. The tuned
text runs at x16 reach that sum in 26 steps of their warm-up, where rounding is still a
few 1e-6; re-fitted for 50 they differ by 1e-4 to 2e-2 by step 50 (rounding, amplified),
while a learning rate x 1.01 moves their first 12 steps by 4e-3.
`verify` re-fits a sample of committed runs over that window with the plain loop and
compares the per-step losses with the committed ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..paths import STUDY_DIR
from ..train.loop import training_losses
from ..train.text import text_training_losses
from ..util import torch_threads
from .run import run_from_record
from .run_files import committed_entries

VERIFY_STEPS = 50
VERIFY_LR_SUM = 0.05
# Between the ~2.4e-6 that rounding reaches and the ~4.4e-4 of the smallest real change.
TOLERANCE = 3e-5


@dataclass(frozen=True)
class Check:
    """One committed run re-fitted: the largest training-loss difference over its first steps."""
    key: str
    label: str
    max_diff: float
    steps: int  # the window compared (`verify_window`)

    @property
    def ok(self) -> bool:
        return self.max_diff <= TOLERANCE


def run_kind(record: dict) -> tuple:
    """What a sample must cover: the task, and for text the model size and the recipe
    (the tuned study's runs are compiled, at two sizes, with their own weight decay)."""
    budget = record["budget"]
    return (record["task"], record.get("size", "S"), budget.get("decay", "all"))


def sample_keys(entries: dict[str, dict], n: int) -> list[str]:
    """`n` runs spread over task x regime x variant: round-robin over those groups in
    sorted order, each group in key order, so the sample is the same on every machine;
    then every kind of run (`run_kind`) the sample missed (the text runs sort last) takes
    the place of the last pick of a kind that has more than one."""
    groups: dict[tuple, list[str]] = {}
    for key in sorted(entries):
        rec = entries[key]["record"]
        regime = rec["budget"].get("regime", rec["task"])
        groups.setdefault((rec["task"], regime, rec["variant"]), []).append(key)
    order = [groups[g] for g in sorted(groups)]
    picked: list[str] = []
    depth = 0
    while len(picked) < min(n, len(entries)):
        for keys in order:
            if depth < len(keys) and len(picked) < n:
                picked.append(keys[depth])
        depth += 1
    task = {k: run_kind(entries[k]["record"]) for k in entries}
    for missing in sorted({task[k] for k in entries} - {task[k] for k in picked}):
        counts = {t: sum(task[k] == t for k in picked) for t in set(task[k] for k in picked)}
        spare = [i for i, k in enumerate(picked) if counts[task[k]] > 1]
        if spare:
            picked[spare[-1]] = next(k for keys in order for k in keys if task[k] == missing)
    return picked


def verify_window(record: dict, steps: int = VERIFY_STEPS) -> int:
    """How many first steps of a run `verify` compares: at most `steps`, and no more than
    the steps whose learning rates sum to `VERIFY_LR_SUM` (at least one step)."""
    run = run_from_record(record, strict=False)
    rate = run.budget.lr_at if run.task == "text" else (lambda step: run.budget.lr)
    total, n = 0.0, 0
    while n < steps and total + rate(n + 1) <= VERIFY_LR_SUM * (1 + 1e-9):
        total += rate(n + 1)
        n += 1
    return max(1, n)


def refit_losses(record: dict, steps: int = VERIFY_STEPS) -> list[float]:
    """The first `steps` losses of the run a record describes, re-fitted with the plain loop."""
    run = run_from_record(record, strict=False)
    with torch_threads(1):
        if run.task == "text":
            return text_training_losses(run.config, run.seed, run.budget, steps)
        return training_losses(run.config, run.spec, run.seed, run.budget, steps, fast=False)


def check(entry: dict, steps: int = VERIFY_STEPS) -> Check:
    steps = min(verify_window(entry["record"], steps), len(entry["losses"]))
    fresh = refit_losses(entry["record"], steps)
    diff = max(abs(a - b) for a, b in zip(fresh, entry["losses"][:steps]))
    return Check(entry["key"], entry["label"], diff, steps)


def verify(cache_dir: Path = STUDY_DIR, sample: int = 8, keys=None,
           steps: int = VERIFY_STEPS, progress=None) -> list[Check]:
    """Re-fit `keys` (or a spread `sample`) of the committed runs; one Check per run."""
    if not isinstance(sample, int) or sample < 1:
        raise ValueError(f"sample must be a positive integer, got {sample!r}")
    entries = committed_entries(cache_dir)
    if keys:
        unknown = [k for k in keys if k not in entries]
        if unknown:
            raise ValueError(f"no committed run with key(s) {unknown} in {cache_dir}; "
                             "`llamanat study --list` prints every run's key")
    else:
        keys = sample_keys(entries, sample)
    out = []
    for key in keys:
        out.append(check(entries[key], steps))
        if progress is not None:
            progress(out[-1])
    return out


def describe(c: Check) -> str:
    verdict = "ok" if c.ok else "DIFFERS"
    return f"{c.key}  {c.label:<40} {c.steps:>2} steps  max |Δloss| {c.max_diff:.1e}  {verdict}"
