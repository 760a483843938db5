"""The study engine (issue 3): resumable, atomic, detects bad cache entries, pool == sequential,
and the committed results provably come from this code."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from llamanat_core import study
from llamanat_core.study import Run, check_entry, plan, run_path, run_study, unique_runs
from llamanat_core.train import Budget

ROOT = Path(__file__).resolve().parent.parent
TINY = Budget.short(12)


def tiny_runs():
    return unique_runs(plan(("sweep",), seeds=(0,), budget=TINY))  # 4 runs


def comparable(entry: dict) -> dict:
    """Everything but the wall time."""
    return {k: v for k, v in entry.items() if k != "seconds"}


def read_all(cache_dir: Path) -> dict[str, dict]:
    out = {}
    for p in sorted((cache_dir / "runs").glob("*.json")):
        entry, why = check_entry(p)
        assert entry is not None, f"{p.name}: {why}"
        out[p.stem] = comparable(entry)
    return out


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("reference")
    run_study(tiny_runs(), d, workers=1, weights_dir=d / "w", progress=False)
    return d


def test_plan_shares_runs_between_measurements():
    p = plan()
    assert {k: len(v) for k, v in p.items()} == {"matrix": 70, "length": 35, "sweep": 20, "alphabet": 30}
    # llama recall at base 10,000 with the name answer is one run in matrix, length, sweep and alphabet
    shared = Run("recall", "llama", 0).key
    assert all(any(r.key == shared for r in runs) for runs in p.values())
    assert len(unique_runs(p)) == 70 + 15 + 20
    assert Run("recall", "llama", 0, (("rope_theta", 10_000.0),)).key == shared


def test_plan_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown measurement"):
        plan(("matrx",))
    with pytest.raises(ValueError, match="seeds"):
        plan(seeds=(-1,))
    with pytest.raises(ValueError, match="unknown variant"):
        Run("recall", "gqa", 0)
    with pytest.raises(ValueError, match="workers"):
        run_study([], workers=0)


def test_pool_and_sequential_give_identical_files(reference_dir, tmp_path):
    run_study(tiny_runs(), tmp_path, workers=2, weights_dir=tmp_path / "w", progress=False)
    assert read_all(tmp_path) == read_all(reference_dir)
    assert len(read_all(tmp_path)) == 4


def test_rerun_uses_the_cache(reference_dir, capsys):
    before = {p: p.stat().st_mtime_ns for p in (reference_dir / "runs").glob("*.json")}
    run_study(tiny_runs(), reference_dir, workers=1, weights_dir=reference_dir / "w")
    assert "nothing left to run" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in (reference_dir / "runs").glob("*.json")} == before


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong-record", "missing-losses"])
def test_bad_cache_entry_is_reported_and_recomputed(reference_dir, tmp_path, capsys, damage):
    runs = tiny_runs()
    run_study(runs, tmp_path, workers=1, weights_dir=tmp_path / "w", progress=False)
    victim = run_path(tmp_path, runs[1])
    text = victim.read_text()
    if damage == "truncate":
        victim.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        victim.write_bytes(b"\x00\xff not json")
    elif damage == "wrong-record":  # a valid file under another run's name
        victim.write_text(run_path(tmp_path, runs[0]).read_text())
    else:
        entry = json.loads(text)
        entry["losses"] = entry["losses"][:3]
        victim.write_text(json.dumps(entry))
    assert check_entry(victim)[0] is None
    run_study(runs, tmp_path, workers=1, weights_dir=tmp_path / "w")
    err = capsys.readouterr().err
    assert victim.name in err and "recomputing" in err
    assert read_all(tmp_path) == read_all(reference_dir)


def test_killed_study_resumes_to_identical_results(reference_dir, tmp_path):
    """SIGKILL the CLI mid-study, restart it, and get exactly the uninterrupted results."""
    cmd = [sys.executable, "-m", "llamanat_core.cli", "study", "--only", "sweep", "--seeds", "0",
           "--steps", "12", "--cache-dir", str(tmp_path), "--workers", "1"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    runs_dir = tmp_path / "runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(runs_dir.glob("*.json"))) < 1:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(runs_dir.glob("*.json")))
    assert 1 <= done < 4, f"the kill should land mid-study, found {done} finished runs"
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    assert read_all(tmp_path) == read_all(reference_dir)
    assert not list(runs_dir.glob("*.tmp")) or all(p.name.startswith(".") for p in runs_dir.glob("*.tmp"))


def test_results_frame_is_tidy(reference_dir):
    p = plan(("sweep",), seeds=(0,), budget=TINY)
    df = study.frame(p, {k: v for k, v in read_all(reference_dir).items()})
    assert len(df) == 4 * len(TINY.checkpoints)
    assert sorted(df.rope_theta.unique()) == [10.0, 100.0, 10_000.0, 1_000_000.0]
    assert df.groupby("run").final.sum().eq(1).all()
    assert df.test_acc.between(0, 1).all() and df.test_acc_12.between(0, 1).all()


# ------------------------------------------------------------ the committed study

COMMITTED = study.summary_path().exists()


@pytest.mark.skipif(not COMMITTED, reason="no committed study in artifacts/study")
def test_committed_study_is_complete():
    """Every run of the plan is cached and valid; the summary covers all of them."""
    p = plan()
    runs = unique_runs(p)
    missing = [r.label for r in runs if study.cached(study.STUDY_DIR, r) is None]
    assert not missing, f"runs missing from artifacts/study: {missing[:5]}"
    df = study.load_results()
    assert set(df.run) == {r.key for r in runs}
    assert len(df) == sum(len(v) for v in p.values()) * len(Budget().checkpoints)
    for r in (Run("addition", "llama", 0), Run("recall", "llama", 0), Run("recall", "abs_pos", 0)):
        assert study.weights_path(r).exists()


@pytest.mark.skipif(not COMMITTED, reason="no committed study in artifacts/study")
def test_cli_on_committed_tree_has_nothing_to_run():
    out = subprocess.run([sys.executable, "-m", "llamanat_core.cli", "study", "--workers", "2"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert "nothing left to run" in out.stderr  # every run cached: nothing trains
    assert "running" not in out.stderr


@pytest.mark.skipif(not COMMITTED, reason="no committed study in artifacts/study")
def test_refit_reproduces_committed_run():
    """Re-fit llama recall seed 0 to its first checkpoint: the committed numbers come from this code."""
    entry, why = check_entry(run_path(study.STUDY_DIR, Run("recall", "llama", 0)))
    assert entry is not None, why
    env, here = entry["env"], study.environment()
    if env["torch"] != torch.__version__:
        pytest.skip(f"recorded with torch {env['torch']}, this is {torch.__version__}")
    if env["cpu"] != here["cpu"]:
        pytest.skip(f"recorded on {env['cpu']!r}, this is {here['cpu']!r}: kernels may round differently")
    committed_row, refit_row, committed_losses, refit_losses, _ = study.reference_refit("recall", 0)
    assert refit_losses == committed_losses
    assert refit_row == committed_row


def test_saved_weights_are_byte_stable_and_load_back(tmp_path):
    """Weights are a committed artifact: the same tensors give the same bytes every time."""
    from safetensors.torch import load_file

    from llamanat_core import TinyLlama, variant_config

    run = Run("recall", "llama", 0)
    state = {k: v for k, v in TinyLlama(variant_config("llama"), seed=0).state_dict().items()
             if k != "lm_head.weight"}
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    study.save_weights(state, run, a)
    study.save_weights(dict(reversed(list(state.items()))), run, b)
    assert a.read_bytes() == b.read_bytes()
    loaded = load_file(str(a))
    assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)
