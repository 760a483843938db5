"""The run cache: one JSON file per run, named by its key (`run.Run.key`).

A run's result is written by `store` on the machine that drives the study: the weights
first, then the run file, each atomically, so the run file is the commit point and a
killed study leaves either a complete run or nothing. A file that does not parse, whose
record does not hash to its name, or whose curves are incomplete is reported and
recomputed, never used (`check_entry`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..paths import STUDY_DIR, WEIGHTS_DIR
from ..train.text import endpoints_of
from ..util import atomic_write_bytes, atomic_write_text
from .run import Run, record_key, version_of
from .weights import weights_path

LOSSES_KEPT = 100  # per-step training losses kept in the run file (verify re-fits 50)
# What every run file holds, and what a run of each kind adds.
REQUIRED = {"record", "dense", "losses", "params"}
TASK_REQUIRED = {"puzzle": {"curve", "stop_step", "solve_step"}, "text": {"endpoints"}}


def run_path(cache_dir: Path, run: Run) -> Path:
    return Path(cache_dir) / "runs" / f"{run.key}.json"


def _kind(entry: dict) -> str:
    return "text" if entry.get("record", {}).get("task") == "text" else "puzzle"


def _complete(entry: dict) -> bool:
    """Does the entry hold every curve point its budget asks for? A puzzle run stops
    between its minimum and its cap, with a test point at every checkpoint and at its stop;
    a text run trains its whole budget and scores every endpoint."""
    budget = entry["record"]["budget"]
    if _kind(entry) == "text":
        stop = budget["steps"]
        curve_ok = set(entry["endpoints"]) == endpoints_of(budget.get("decay", "all"))
    else:
        stop, checkpoints = entry["stop_step"], budget["checkpoints"]
        curve_ok = (isinstance(stop, int) and budget["min_steps"] <= stop <= budget["steps"]
                    and len(entry["curve"]) == len(checkpoints) + (stop not in checkpoints)
                    and entry["curve"][-1]["step"] == stop)
    return (curve_ok and bool(entry["dense"]) and entry["dense"][-1]["step"] == stop
            and len(entry["losses"]) == min(LOSSES_KEPT, stop))


def check_entry(path: Path) -> tuple[dict | None, str | None]:
    """(entry, None) if the file is a complete result whose record hashes to its name,
    else (None, why)."""
    try:
        entry = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        return None, f"unreadable ({e.__class__.__name__}: {e})"
    if not isinstance(entry, dict) or not REQUIRED | TASK_REQUIRED[_kind(entry)] <= entry.keys():
        return None, "missing fields"
    if record_key(entry["record"]) != Path(path).stem:
        return None, "its record does not match its name"
    if not _complete(entry):
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
        version, current = entry["record"].get("version"), version_of(entry["record"]["task"])
        if version != current:
            raise ValueError(f"run file {path.name} was made by study version {version}, this code "
                             f"is version {current}: the cache belongs to another plan; "
                             "re-run `llamanat study` to bring it up to date")
        out[path.stem] = entry
    if bad:
        raise ValueError(f"{len(bad)} of {len(named)} run files in {folder} are absent or damaged, "
                         f"e.g. {bad[0]}")
    return out


def load_entry(cache_dir: Path, run: Run, weights_dir: Path | None = WEIGHTS_DIR) -> dict | None:
    """The cached result of `run`, or None when it must be (re)computed: absent, damaged
    (reported on stderr), or its kept weights are missing (`weights_dir` None: the run
    file alone, for reading a result whose weights nobody needs yet)."""
    path = run_path(cache_dir, run)
    if not path.exists():
        return None
    entry, why = check_entry(path)
    if entry is None:
        print(f"study: cache entry {path.name} ({run.label}) is {why}; recomputing", file=sys.stderr)
        return None
    if weights_dir is not None and run.keeps_weights and not weights_path(run, weights_dir).exists():
        return None
    return entry


def store(run: Run, entry: dict, weights: bytes | None, cache_dir: Path,
          weights_dir: Path = WEIGHTS_DIR) -> None:
    """Write a run's weights, then its run file (the commit point), atomically."""
    if weights is not None:
        atomic_write_bytes(weights_path(run, weights_dir), weights)
    atomic_write_text(run_path(cache_dir, run), json.dumps(entry, indent=1) + "\n")
