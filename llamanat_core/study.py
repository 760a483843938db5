"""The measurement plan of SPEC §7, its resumable run cache, and the results as pandas.

Each run is a small frozen record (task, variant, seed, overrides, budget). Its result is
one JSON file in the cache named from a stable hash of that record, written atomically
(temp file + rename). A file that does not parse, or whose record does not hash to its
name, is reported and recomputed, never used. Runs shared between measurements (e.g.
`llama` recall at base 10,000 sits in the matrix, the sweep and the alphabet table) are
trained once.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

import torch

from .config import MATRIX_VARIANTS, VARIANTS, variant_config
from .fast import compile_default
from .train import Budget, TaskSpec, budget_dict, fit

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "artifacts" / "study"  # the committed study
WEIGHTS_DIR = ROOT / "artifacts" / "weights"
SEEDS = (0, 1, 2, 3, 4)
THETAS = (10.0, 100.0, 10_000.0, 1_000_000.0)
EXTRAPOLATE = (8, 12)  # every recall run is re-scored unchanged at these lengths
ALPHABET_VARIANTS = ("llama", "abs_pos", "untied")
RUN_SCHEMA = 2


@dataclass(frozen=True)
class Run:
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
        # Drop overrides equal to the variant's own value so shared runs hash alike.
        base = variant_config(self.variant)
        kept = tuple(sorted((k, v) for k, v in self.overrides if getattr(base, k) != v))
        object.__setattr__(self, "overrides", kept)

    @property
    def config(self):
        return variant_config(self.variant, **dict(self.overrides))

    @property
    def spec(self) -> TaskSpec:
        extra = EXTRAPOLATE if self.task == "recall" else ()
        return TaskSpec(self.task, 4, self.answer if self.task == "recall" else "name", extra)

    @property
    def save_weights(self) -> bool:
        """Seed-0 weights kept for chapters that inspect a trained model: the reference on
        each task, and the learned position table on recall (train short, test long)."""
        keep = self.variant == "llama" or (self.variant == "abs_pos" and self.task == "recall")
        return keep and self.seed == 0 and not self.overrides and self.answer == "name"

    def record(self) -> dict:
        return {"schema": RUN_SCHEMA, "task": self.task, "variant": self.variant,
                "seed": self.seed, "overrides": [list(o) for o in self.overrides],
                "answer": self.spec.answer, "extrapolate": list(self.spec.extrapolate),
                "budget": budget_dict(self.budget), "compile": self.compile}

    @property
    def key(self) -> str:
        blob = json.dumps(self.record(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
                        for k, v in self.overrides)
        answer = f" answer={self.answer}" if self.task == "recall" and self.answer != "name" else ""
        return f"{self.variant} {self.task}{extra}{answer} seed={self.seed}"


MEASUREMENTS = ("matrix", "length", "sweep", "alphabet")


def plan(only: tuple[str, ...] | None = None, seeds=SEEDS, budget: Budget = Budget(),
         compile: bool = True) -> dict[str, list[Run]]:
    """The measurement plan: name -> runs. A run may appear under several names."""
    only = tuple(only or MEASUREMENTS)
    bad = [m for m in only if m not in MEASUREMENTS]
    if bad:
        raise ValueError(f"unknown measurement(s) {bad}; choose from {list(MEASUREMENTS)}")
    seeds = tuple(seeds)
    if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative integers, got {seeds!r}")
    out: dict[str, list[Run]] = {}
    kw = {"budget": budget, "compile": compile}
    if "matrix" in only:
        out["matrix"] = [Run(t, v, s, **kw) for t in ("addition", "recall")
                         for v in MATRIX_VARIANTS for s in seeds]
    if "length" in only:  # train short (4 pairs), test long (8, 12): the recall runs re-scored
        out["length"] = [Run("recall", v, s, **kw) for v in MATRIX_VARIANTS for s in seeds]
    if "sweep" in only:
        out["sweep"] = [Run("recall", "llama", s, (("rope_theta", th),), **kw)
                        for th in THETAS for s in seeds]
    if "alphabet" in only:
        out["alphabet"] = [Run("recall", v, s, answer=a, **kw) for v in ALPHABET_VARIANTS
                           for a in ("name", "copy") for s in seeds]
    return out


def unique_runs(p: dict[str, list[Run]]) -> list[Run]:
    seen: dict[str, Run] = {}
    for runs in p.values():
        for r in runs:
            seen.setdefault(r.key, r)
    return list(seen.values())


# ---------------------------------------------------------------- the run cache

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


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_path(cache_dir: Path, run: Run) -> Path:
    return Path(cache_dir) / "runs" / f"{run.key}.json"


def weights_path(run: Run, weights_dir: Path = WEIGHTS_DIR) -> Path:
    """The committed study's budget gets the plain name; any other run (a reader's reduced
    budget, the eager path) carries its key, so runs never overwrite each other."""
    name = f"{run.variant}_{run.task}_seed{run.seed}"
    if run.budget != Budget() or not run.compile:
        name += f"_{run.key}"
    return Path(weights_dir) / f"{name}.safetensors"


def load_weights(run: Run, weights_dir: Path = WEIGHTS_DIR):
    """The saved weights of `run` as an eval-mode TinyLlama, or None if none were saved.
    A tied head is stored once, as the embedding, and comes back tied."""
    from safetensors.torch import load_file

    from .model import TinyLlama

    path = weights_path(run, weights_dir)
    if not path.exists():
        return None
    model = TinyLlama(run.config, seed=None)
    missing, unexpected = model.load_state_dict(load_file(str(path)), strict=False)
    if unexpected or set(missing) - ({"lm_head.weight"} if run.config.tie_embeddings else set()):
        raise ValueError(f"{path}: unexpected {unexpected}, missing {missing}")
    return model.eval()


def check_entry(path: Path) -> tuple[dict | None, str | None]:
    """(entry, None) if the file is a complete result whose record hashes to its name,
    else (None, why)."""
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return None, f"unreadable ({e.__class__.__name__}: {e})"
    if not isinstance(entry, dict) or not {"record", "curve", "losses", "params"} <= entry.keys():
        return None, "missing fields"
    blob = json.dumps(entry["record"], sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(blob.encode()).hexdigest()[:16] != path.stem:
        return None, "its record does not match its name"
    steps = entry["record"].get("budget", {}).get("steps")
    if len(entry["losses"]) != steps or len(entry["curve"]) != len(entry["record"]["budget"]["checkpoints"]):
        return None, "incomplete curve"
    return entry, None


def cached(cache_dir: Path, run: Run, weights_dir: Path = WEIGHTS_DIR) -> dict | None:
    path = run_path(cache_dir, run)
    if not path.exists():
        return None
    entry, why = check_entry(path)
    if entry is None:
        print(f"study: cache entry {path.name} ({run.label}) is {why}; recomputing", file=sys.stderr)
        return None
    if run.save_weights and not weights_path(run, weights_dir).exists():
        return None
    return entry


def save_weights(state: dict, run: Run, path: Path) -> None:
    """safetensors, atomically. The metadata is one JSON string: safetensors stores a dict
    of several keys in arbitrary order, which would make the file's bytes vary."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    record = json.dumps({"run": run.key, "label": run.label}, sort_keys=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp), metadata={"run": record})
    os.replace(tmp, path)


def execute(run: Run, cache_dir: Path, weights_dir: Path = WEIGHTS_DIR) -> dict:
    """Train one run at one thread and write its entry (and weights) atomically."""
    torch.set_num_threads(1)
    result = fit(run.config, run.spec, run.seed, run.budget, compile=run.compile)
    entry = {"key": run.key, "record": run.record(), "label": run.label,
             "params": result.model.num_parameters(), "curve": result.curve,
             "losses": result.losses, "final_loss": result.losses[-1],
             "seconds": round(result.seconds, 2), "env": environment()}
    if run.save_weights:
        state = {k: v for k, v in result.model.state_dict().items()
                 if k != "lm_head.weight" or not run.config.tie_embeddings}
        save_weights(state, run, weights_path(run, weights_dir))
    atomic_write_text(run_path(cache_dir, run), json.dumps(entry, indent=1) + "\n")
    return entry


def _worker_init() -> None:
    torch.set_num_threads(1)


def _execute_in_worker(run: Run, cache_dir: str, weights_dir: str) -> str:
    execute(run, Path(cache_dir), Path(weights_dir))
    return run.key


def run_study(runs: list[Run], cache_dir: Path = STUDY_DIR, workers: int = 1,
              weights_dir: Path = WEIGHTS_DIR, progress: bool = True) -> dict[str, dict]:
    """Run what is not cached (in a pool of `workers` one-thread processes); return all entries."""
    from tqdm.auto import tqdm

    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    cache_dir = Path(cache_dir)
    entries = {r.key: e for r in runs if (e := cached(cache_dir, r, weights_dir)) is not None}
    todo = [r for r in runs if r.key not in entries]
    if not todo:
        if progress:
            print(f"study: all {len(runs)} runs are cached in {cache_dir}; nothing left to run",
                  file=sys.stderr)
        return entries
    if progress:
        print(f"study: {len(runs) - len(todo)} of {len(runs)} runs cached; running {len(todo)} "
              f"with {workers} worker(s)", file=sys.stderr)
    bar = tqdm(total=len(todo), unit="run", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    t0 = time.perf_counter()
    try:
        if workers == 1:
            threads = torch.get_num_threads()
            try:
                for r in todo:
                    bar.set_postfix_str(r.label)
                    entries[r.key] = execute(r, cache_dir, weights_dir)
                    bar.update()
            finally:
                torch.set_num_threads(threads)
        else:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                     initializer=_worker_init) as pool:
                futures = {pool.submit(_execute_in_worker, r, str(cache_dir), str(weights_dir)): r
                           for r in todo}
                for fut in as_completed(futures):
                    r = futures[fut]
                    fut.result()
                    entries[r.key], _ = check_entry(run_path(cache_dir, r))
                    bar.set_postfix_str(r.label)
                    bar.update()
    finally:
        bar.close()
    if progress:
        print(f"study: ran {len(todo)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return entries


# ---------------------------------------------------------------- results as pandas

def frame(p: dict[str, list[Run]], entries: dict[str, dict]):
    """Tidy frame: one row per (measurement, run, checkpoint)."""
    import pandas as pd

    rows = []
    for measurement, runs in p.items():
        for r in runs:
            e = entries.get(r.key)
            if e is None:
                continue
            cfg = r.config
            for point in e["curve"]:
                rows.append({
                    "measurement": measurement, "run": r.key, "task": r.task,
                    "variant": r.variant, "seed": r.seed, "answer": r.spec.answer,
                    "rope_theta": cfg.rope_theta, "tie_embeddings": cfg.tie_embeddings,
                    "params": e["params"], "steps": r.budget.steps,
                    "final": point["step"] == r.budget.steps, **point,
                    "final_loss": e["final_loss"]})
    df = pd.DataFrame(rows)
    for col in ("test_acc_8", "test_acc_12"):
        if col not in df:
            df[col] = float("nan")
    return df


def summary_path(cache_dir: Path = STUDY_DIR) -> Path:
    return Path(cache_dir) / "results.csv"


def write_summary(p: dict[str, list[Run]], entries: dict[str, dict], cache_dir: Path = STUDY_DIR):
    df = frame(p, entries)
    atomic_write_text(summary_path(cache_dir), df.to_csv(index=False, float_format="%.10g"))
    return df


def load_results(cache_dir: Path = STUDY_DIR, measurement: str | None = None):
    """The committed study as a tidy pandas frame (one row per measurement, run, checkpoint)."""
    import pandas as pd

    path = summary_path(cache_dir)
    if not path.exists():
        raise FileNotFoundError(f"no study results at {path}; run `llamanat study` first")
    df = pd.read_csv(path)
    if measurement is not None:
        if measurement not in MEASUREMENTS:
            raise ValueError(f"unknown measurement {measurement!r}; choose from {list(MEASUREMENTS)}")
        df = df[df.measurement == measurement].reset_index(drop=True)
    return df


FRESH_DIR = ROOT / ".fresh"  # a reader's own re-runs; never committed


def chapter_results(measurements, fresh: bool = False, seeds=SEEDS, steps: int | None = None,
                    workers: int = 1, variants=None):
    """What a chapter publishes: the committed study, or (fresh=True) its runs re-trained
    here through the resumable runner with the given seeds and steps. `variants` keeps
    only those rows (a chapter re-trains just what it shows)."""
    if isinstance(measurements, str):
        measurements = (measurements,)
    if variants is not None:
        unknown = sorted(set(variants) - set(VARIANTS))
        if unknown:
            raise ValueError(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    seeds = tuple(int(s) for s in seeds)
    full = Budget()
    if not fresh:
        if steps not in (None, full.steps):
            raise ValueError(f"steps={steps} applies only with fresh=True; the committed "
                             f"study used {full.steps}")
        df = load_results()
        missing = sorted(set(seeds) - set(df.seed))
        if missing:
            raise ValueError(f"seeds {missing} are not in the committed study (it has "
                             f"{sorted(set(df.seed))}); use fresh=True to train them")
        keep = df.measurement.isin(measurements) & df.seed.isin(seeds)
        if variants is not None:
            keep &= df.variant.isin(variants)
        return df[keep].reset_index(drop=True)
    budget = full if steps in (None, full.steps) else Budget.short(int(steps))
    # compiled as the study unless LLAMANAT_COMPILE=0 (recorded in every run either way)
    p = plan(tuple(measurements), seeds, budget, compile=compile_default())
    if variants is not None:
        p = {m: [r for r in runs if r.variant in variants] for m, runs in p.items()}
    entries = run_study(unique_runs(p), FRESH_DIR, workers=workers,
                        weights_dir=FRESH_DIR / "weights")
    return frame(p, entries)


def reference_refit(task: str = "recall", seed: int = 0, cache_dir: Path = STUDY_DIR):
    """Re-fit one committed run of the real plan to its first checkpoint; return
    (committed first-checkpoint row, re-fitted row, recorded environment)."""
    run = Run(task, "llama", seed)
    entry, why = check_entry(run_path(cache_dir, run))
    if entry is None:
        raise ValueError(f"committed run {run.label} is {why}")
    first = run.budget.checkpoints[0]
    short = Budget(**{**asdict(run.budget), "steps": first, "checkpoints": (first,)})
    threads = torch.get_num_threads()
    torch.set_num_threads(entry["env"]["threads"])
    try:
        result = fit(run.config, run.spec, seed, short, compile=entry["record"]["compile"])
    finally:
        torch.set_num_threads(threads)
    return entry["curve"][0], result.curve[0], entry["losses"][:first], result.losses, entry["env"]
