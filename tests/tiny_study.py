"""The tiny study the study and Ray tests train: the sweep's four eager runs of seed 0 at
12 steps (one keeps its weights), and how a finished study's files are compared."""
from __future__ import annotations

from pathlib import Path

from llamanat_core.study import check_entry, plan, unique_runs
from llamanat_core.train.loop import Budget

TINY = Budget.for_steps(12)
TINY_ARGS = ["--only", "sweep", "--seeds", "0", "--steps", "12"]  # tiny_runs() on the command line


def tiny_runs():
    return unique_runs(plan(("sweep",), seeds=(0,), budget=TINY, compile=False))


def read_all(cache_dir: Path) -> dict[str, object]:
    """Every run file (wall time aside, each checked) and every weights file, by name."""
    out: dict[str, object] = {}
    for p in sorted(Path(cache_dir).rglob("*")):
        if p.suffix == ".json":
            entry, why = check_entry(p)
            assert entry is not None, f"{p.name}: {why}"
            out[p.name] = {k: v for k, v in entry.items() if k != "seconds"}
        elif p.suffix == ".safetensors":
            out[p.name] = p.read_bytes()
    return out
