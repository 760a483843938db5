"""Kept weights: one safetensors file per kept run, written from the bytes a worker
returns (`weights_bytes`), read back as an eval-mode TinyLlama (`load_model`)."""
from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save

from ..model.model import TinyLlama
from ..paths import WEIGHTS_DIR, fresh_runs_dir
from ..train.loop import Budget
from .committed import study_compile
from .run import Run


def weights_path(run: Run, weights_dir: Path = WEIGHTS_DIR) -> Path:
    """The committed study's budget gets a plain name (with its size where not S); any
    other run (a reader's reduced budget, the eager path) carries its key, so runs never
    overwrite each other."""
    size = f"_{run.size}" if run.task == "text" and run.size != "S" else ""
    name = f"{run.variant}_{run.task}{size}_seed{run.seed}"
    if run.budget != type(run.budget)() or not run.compile:
        name += f"_{run.key}"
    return Path(weights_dir) / f"{name}.safetensors"


def weights_bytes(run: Run, model, step: int) -> bytes:
    """`model`'s weights as safetensors bytes, a tied head stored once (as the embedding;
    `load_model` ties it again), with the run and the step they were saved at."""
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if k != "lm_head.weight" or not run.config.tie_embeddings}
    # one JSON string: safetensors stores several metadata keys in arbitrary order
    meta = json.dumps({"run": run.key, "label": run.label, "step": step}, sort_keys=True)
    return save(state, metadata={"run": meta})


def load_model(path: Path, cfg):
    """The weights in one safetensors file as an eval-mode TinyLlama of `cfg`. A tied head
    is stored once, as the embedding, and comes back tied; any other missing or unexpected
    tensor is an error."""
    model = TinyLlama(cfg, seed=None)
    missing, unexpected = model.load_state_dict(load_file(str(path)), strict=False)
    if unexpected or set(missing) - ({"lm_head.weight"} if cfg.tie_embeddings else set()):
        raise ValueError(f"{path}: unexpected {unexpected}, missing {missing}")
    return model.eval()


def load_weights(run: Run, weights_dir: Path = WEIGHTS_DIR):
    """The saved weights of `run` as an eval-mode TinyLlama, or None if none were saved."""
    path = weights_path(run, weights_dir)
    return load_model(path, run.config) if path.exists() else None


def weights_step(path: Path) -> int:
    """The training step at which a run's weights were saved (from their metadata)."""
    with safe_open(str(path), "pt") as f:
        return int(json.loads(f.metadata()["run"])["step"])


def kept_run(task: str, variant: str, seed: int, steps: int | None = None,
             fresh: bool = False) -> Run:
    """The finite-data puzzle run whose weights a chapter reads: the committed study's, or
    with fresh=True the reader's own, trained by the chapter at a cap of `steps`."""
    budget = Budget.for_steps(None if steps is None else int(steps))
    return Run(task, variant, seed, budget=budget, compile=study_compile(committed=not fresh))


def trained_weights(task: str, variant: str, seed: int, steps: int | None = None,
                    fresh: bool = False, weights_dir: Path | None = None):
    """(model or None, path): the kept weights of `kept_run(task, variant, seed, steps,
    fresh)` as an eval-mode TinyLlama, from the committed weights (artifacts/weights),
    the fresh runs' folder with fresh=True, or `weights_dir`; None where none were kept."""
    if weights_dir is None:
        weights_dir = fresh_runs_dir() / "weights" if fresh else WEIGHTS_DIR
    run = kept_run(task, variant, seed, steps, fresh)
    path = weights_path(run, weights_dir)
    return load_weights(run, weights_dir), path
