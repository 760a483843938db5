"""Training one run of the study, whatever its task: `train_run(run) -> (entry, weights)`.

Pure: it writes no file (the driver stores both, `run_files.store`), so a worker on
another machine needs no shared file system. Each task's trainer is one entry of
`TRAINERS`: a new measurement adds one function here, not a copy of the run's plumbing.
"""
from __future__ import annotations

from ..train.loop import fit
from ..train.text import fit_text
from ..util import keep_freed_memory, torch_threads
from .environment import environment
from .run import Run
from .run_files import LOSSES_KEPT
from .weights import weights_bytes


def _train_puzzle(run: Run) -> tuple[dict, object, int]:
    """A puzzle run: its test checkpoints, solve and stop steps, and validation curve."""
    keep_freed_memory()  # fewer page faults in evaluation; the same numbers
    result = fit(run.config, run.spec, run.seed, run.budget, compile=run.compile)
    fields = {"solve_step": result.solve_step, "stop_step": result.stop_step,
              "curve": result.test_curve, "dense": result.val_curve}
    return fields, result, result.stop_step


def _train_text(run: Run) -> tuple[dict, object, int]:
    """A text run: its endpoints and validation curve."""
    result = fit_text(run.config, run.seed, run.budget, compile=run.compile)
    # NaN (a learned table cannot read a longer window) is stored as null: JSON has no NaN
    endpoints = {k: None if v != v else v for k, v in result.endpoints.items()}
    return {"endpoints": endpoints, "dense": result.val_curve}, result, run.budget.steps


TRAINERS = {"addition": _train_puzzle, "recall": _train_puzzle, "text": _train_text}


def train_run(run: Run) -> tuple[dict, bytes | None]:
    """Train one run at one torch thread; return its entry (what its run file holds) and,
    if kept, its weights (safetensors bytes, saved at its last step)."""
    with torch_threads(1):
        fields, result, step = TRAINERS[run.task](run)
        env = environment()
    entry = {"key": run.key, "record": run.record(), "label": run.label,
             "params": result.model.num_parameters(), **fields,
             "losses": result.losses[:LOSSES_KEPT], "final_loss": result.losses[-1],
             "seconds": round(result.seconds, 2), "env": env}
    return entry, weights_bytes(run, result.model, step) if run.keeps_weights else None
