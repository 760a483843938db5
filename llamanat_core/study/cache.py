"""The run cache: one JSON file per run, named from a hash of its record.

A run is trained by `execute` (pure: no files), and its result is written by `store`
on the machine that drives the study: the weights first, then the run file, each
atomically, so the run file is the commit point and a killed study leaves either a
complete run or nothing. A file that does not parse, whose record does not hash to its
name, or whose curves are incomplete is reported and recomputed, never used.
"""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save

from ..fast import compile_default
from ..model import TinyLlama
from ..paths import STUDY_DIR, WEIGHTS_DIR, fresh_runs_dir
from ..text_train import TEXT_ENDPOINTS, fit_text
from ..train import Budget, fit
from ..util import atomic_write_bytes, atomic_write_text, keep_freed_memory, torch_threads
from .plan import STUDY_VERSION, Run, record_key
from .text_plan import TEXT_VERSION, TextRun

LOSSES_KEPT = 100  # per-step training losses kept in the run file (verify re-fits 50)
REQUIRED = {"record", "curve", "dense", "losses", "params", "stop_step", "solve_step"}
TEXT_REQUIRED = {"record", "dense", "losses", "params", "endpoints"}


def environment() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "platform": platform.platform(), "cpu": cpu}


def run_path(cache_dir: Path, run: Run) -> Path:
    return Path(cache_dir) / "runs" / f"{run.key}.json"


def weights_path(run: Run, weights_dir: Path = WEIGHTS_DIR) -> Path:
    """The committed study's budget gets a plain name; any other run (a reader's reduced
    budget, the eager path) carries its key, so runs never overwrite each other."""
    name = f"{run.variant}_{run.task}_seed{run.seed}"
    if run.budget != type(run.budget)() or not run.compile:
        name += f"_{run.key}"
    return Path(weights_dir) / f"{name}.safetensors"


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


def is_committed(cache_dir: Path) -> bool:
    """Whether `cache_dir` is the committed study's folder (artifacts/study)."""
    return Path(cache_dir).resolve() == STUDY_DIR.resolve()


def study_weights_dir(cache_dir: Path) -> Path:
    """Where a study keeps its weights: the committed study's in artifacts/weights, any
    other beside its run files (so a scratch study never writes into the repository)."""
    return WEIGHTS_DIR if is_committed(cache_dir) else Path(cache_dir) / "weights"


def study_compile(committed: bool) -> bool:
    """Whether a study's runs train compiled: the committed study always is; any other
    (a reader's fresh runs, a separate cache) follows LLAMANAT_COMPILE. Compiled and eager
    steps round differently, so the choice is part of every run's key."""
    return True if committed else compile_default()


def kept_run(task: str, variant: str, seed: int, steps: int | None = None,
             fresh: bool = False) -> Run:
    """The finite-data run whose weights a chapter reads: the committed study's, or with
    fresh=True the reader's own, trained by the chapter at a cap of `steps`."""
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


def weights_step(path: Path) -> int:
    """The training step at which a run's weights were saved (from their metadata)."""
    with safe_open(str(path), "pt") as f:
        return int(json.loads(f.metadata()["run"])["step"])


def check_entry(path: Path) -> tuple[dict | None, str | None]:
    """(entry, None) if the file is a complete result whose record hashes to its name,
    else (None, why)."""
    try:
        entry = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        return None, f"unreadable ({e.__class__.__name__}: {e})"
    text = isinstance(entry, dict) and entry.get("record", {}).get("task") == "text"
    if not isinstance(entry, dict) or not (TEXT_REQUIRED if text else REQUIRED) <= entry.keys():
        return None, "missing fields"
    if record_key(entry["record"]) != Path(path).stem:
        return None, "its record does not match its name"
    if text:
        return _check_text_entry(entry)
    budget, stop = entry["record"]["budget"], entry["stop_step"]
    checkpoints = budget["checkpoints"]
    want_curve = len(checkpoints) + (stop not in checkpoints)
    if (not isinstance(stop, int) or not budget["min_steps"] <= stop <= budget["steps"]
            or len(entry["curve"]) != want_curve or entry["curve"][-1]["step"] != stop
            or not entry["dense"] or entry["dense"][-1]["step"] != stop
            or len(entry["losses"]) != min(LOSSES_KEPT, stop)):
        return None, "incomplete curve"
    return entry, None


def _check_text_entry(entry: dict) -> tuple[dict | None, str | None]:
    steps = entry["record"]["budget"]["steps"]
    if (set(entry["endpoints"]) != set(TEXT_ENDPOINTS) or not entry["dense"]
            or entry["dense"][-1]["step"] != steps or len(entry["losses"]) != min(LOSSES_KEPT, steps)):
        return None, "incomplete curve"
    return entry, None


def committed_entries(cache_dir: Path = STUDY_DIR, runs=None) -> dict[str, dict]:
    """The run files of a study by key, each checked: the files of `runs`, or with None
    every file in its runs/ folder. A file absent or damaged, or made by another study
    version than this code's, is an error naming it (`ValueError`); an empty folder is a
    `FileNotFoundError`."""
    folder = Path(cache_dir) / "runs"
    if runs is None:
        named = [(path, path.name) for path in sorted(folder.glob("*.json"))]
    else:
        named = [(run_path(cache_dir, r), r.label) for r in runs]
    if not named:
        raise FileNotFoundError(f"no run files in {folder}")
    out, bad = {}, []
    for path, name in named:
        entry, why = check_entry(path) if path.exists() else (None, "absent")
        if entry is None:
            bad.append(f"{name} ({why})")
            continue
        version = entry["record"].get("version")
        current = TEXT_VERSION if entry["record"]["task"] == "text" else STUDY_VERSION
        if version != current:
            raise ValueError(f"run file {path.name} was made by study version {version}, this code "
                             f"is version {current}: the cache belongs to another plan; "
                             "re-run `llamanat study` to bring it up to date")
        out[path.stem] = entry
    if bad:
        raise ValueError(f"{len(bad)} of {len(named)} run files in {folder} are absent or damaged, "
                         f"e.g. {bad[0]}")
    return out


def load_entry(cache_dir: Path, run: Run, weights_dir: Path = WEIGHTS_DIR) -> dict | None:
    """The cached result of `run`, or None when it must be (re)computed: absent, damaged
    (reported on stderr), or its kept weights are missing."""
    path = run_path(cache_dir, run)
    if not path.exists():
        return None
    entry, why = check_entry(path)
    if entry is None:
        print(f"study: cache entry {path.name} ({run.label}) is {why}; recomputing", file=sys.stderr)
        return None
    if run.keeps_weights and not weights_path(run, weights_dir).exists():
        return None
    return entry


def execute(run: Run) -> tuple[dict, bytes | None]:
    """Train one run at one torch thread; return its entry and, if kept, its weights
    (safetensors bytes). Writes nothing: the driver stores both."""
    if isinstance(run, TextRun):
        return _execute_text(run)
    keep_freed_memory()  # fewer page faults in evaluation; the same numbers
    with torch_threads(1):
        result = fit(run.config, run.spec, run.seed, run.budget, compile=run.compile)
        env = environment()
    entry = {"key": run.key, "record": run.record(), "label": run.label,
             "params": result.model.num_parameters(), "solve_step": result.solve_step,
             "stop_step": result.stop_step, "curve": result.test_curve, "dense": result.val_curve,
             "losses": result.losses[:LOSSES_KEPT], "final_loss": result.losses[-1],
             "seconds": round(result.seconds, 2), "env": env}
    return entry, weights_bytes(run, result.model, result.stop_step) if run.keeps_weights else None


def _execute_text(run: TextRun) -> tuple[dict, bytes | None]:
    """`execute` for a text run: its endpoints, validation curve and first losses."""
    with torch_threads(1):
        result = fit_text(run.config, run.seed, run.budget)
        env = environment()
    # NaN (a learned table cannot read a longer window) is stored as null: JSON has no NaN
    endpoints = {k: None if v != v else v for k, v in result.endpoints.items()}
    entry = {"key": run.key, "record": run.record(), "label": run.label,
             "params": result.model.num_parameters(), "endpoints": endpoints,
             "dense": result.val_curve, "losses": result.losses[:LOSSES_KEPT],
             "final_loss": result.losses[-1], "seconds": round(result.seconds, 2), "env": env}
    return entry, weights_bytes(run, result.model, run.budget.steps) if run.keeps_weights else None


def weights_bytes(run, model, step: int) -> bytes:
    """`model`'s weights as safetensors bytes, a tied head stored once (as the embedding;
    `load_model` ties it again), with the run and the step they were saved at."""
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if k != "lm_head.weight" or not run.config.tie_embeddings}
    # one JSON string: safetensors stores several metadata keys in arbitrary order
    meta = json.dumps({"run": run.key, "label": run.label, "step": step}, sort_keys=True)
    return save(state, metadata={"run": meta})


def store(run: Run, entry: dict, weights: bytes | None, cache_dir: Path,
          weights_dir: Path = WEIGHTS_DIR) -> None:
    """Write a run's weights, then its run file (the commit point), atomically."""
    if weights is not None:
        atomic_write_bytes(weights_path(run, weights_dir), weights)
    atomic_write_text(run_path(cache_dir, run), json.dumps(entry, indent=1) + "\n")
