"""The study engine: the plan, a resumable and atomic run cache that detects bad entries,
survives a stopped driver, one runner per cache and a failing write,
pool == sequential, the results frames, the study version, and `verify`, which shows on
any CPU that the committed runs come from this code."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from processes import descendants, gone_within, on_linux
from tiny_study import TINY, TINY_ARGS, read_all, tiny_runs

from llamanat_core import study
from llamanat_core.analysis import two_stage
from llamanat_core.study import Run, check_entry, plan, run_path, run_study, unique_runs
from llamanat_core.study import verify as verify_module
from llamanat_core.study.plan import fingerprint_run, interleave_graphs
from llamanat_core.study.run import STUDY_VERSION, VERSION_FINGERPRINT, record_key
from llamanat_core.train.loop import Budget, batch_order, training_losses


def test_plan_shares_runs_between_measurements():
    p = plan()
    assert {k: len(v) for k, v in p.items()} == {"matrix": 320, "length": 160, "sweep": 40, "alphabet": 60}
    # llama recall (finite, base 10,000, name) is one run in matrix, length, sweep and alphabet
    shared = Run("recall", "llama", 0).key
    assert all(any(r.key == shared for r in runs) for runs in p.values())
    assert len(unique_runs(p)) == 320 + 30 + 40
    assert Run("recall", "llama", 0, (("rope_theta", 10_000.0),)).key == shared
    regimes = {(r.regime, m) for m, runs in p.items() for r in runs}
    assert regimes == {("finite", "matrix"), ("fresh", "matrix"), ("finite", "length"),
                       ("fresh", "length"), ("finite", "sweep"), ("finite", "alphabet")}


def test_the_key_holds_the_study_version_and_the_regime():
    run = Run("recall", "llama", 0)
    assert run.record()["version"] == STUDY_VERSION
    assert Run("recall", "llama", 0, budget=Budget(regime="fresh")).key != run.key
    assert Run("recall", "llama", 0, compile=False).key != run.key


def test_weights_are_kept_for_the_reference_and_the_learned_table_only():
    kept = {(r.variant, r.task) for r in unique_runs(plan()) if r.keeps_weights}
    assert kept == {("llama", "addition"), ("llama", "recall"), ("abs_pos", "addition"),
                    ("abs_pos", "recall")}
    assert sum(r.keeps_weights for r in unique_runs(plan())) == 40  # 10 seeds each


def test_plan_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown measurement"):
        plan(("matrx",))
    with pytest.raises(ValueError, match="seeds"):
        plan(seeds=(-1,))
    with pytest.raises(ValueError, match="must not repeat"):
        plan(seeds=(0, 0))
    with pytest.raises(ValueError, match="unknown regime"):
        plan(regimes=("stale",))
    with pytest.raises(ValueError, match="unknown variant"):
        Run("recall", "gqa", 0)
    with pytest.raises(ValueError, match="seed"):
        Run("recall", "llama", -1)
    with pytest.raises(ValueError, match="workers"):
        run_study([], workers=0)
    with pytest.raises(ValueError, match="unknown executor"):
        run_study(tiny_runs(), executor="slurm")


@pytest.mark.pool
def test_pool_and_sequential_give_identical_files(tiny_reference, tmp_path):
    run_study(tiny_runs(), tmp_path, workers=2, weights_dir=tmp_path / "weights", progress=False)
    assert read_all(tmp_path) == read_all(tiny_reference)
    assert len(read_all(tmp_path)) == 4 + 1  # the run files and the one kept weights file


def test_rerun_uses_the_cache(tiny_reference, capsys):
    before = {p: p.stat().st_mtime_ns for p in (tiny_reference / "runs").glob("*.json")}
    run_study(tiny_runs(), tiny_reference, workers=1, weights_dir=tiny_reference / "weights")
    assert "nothing left to run" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in (tiny_reference / "runs").glob("*.json")} == before


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong-record", "missing-dense",
                                    "short-losses", "stop-out-of-range"])
def test_bad_cache_entry_is_reported_and_recomputed(tiny_reference, tmp_path, capsys, damage):
    runs = tiny_runs()
    shutil.copytree(tiny_reference, tmp_path, dirs_exist_ok=True)
    victim = run_path(tmp_path, runs[1])
    text = victim.read_text()
    entry = json.loads(text)
    if damage == "truncate":
        victim.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        victim.write_bytes(b"\x00\xff not json")
    elif damage == "wrong-record":  # a valid file under another run's name
        victim.write_text(run_path(tmp_path, runs[0]).read_text())
    elif damage == "missing-dense":
        entry["dense"] = entry["dense"][:-1]
        victim.write_text(json.dumps(entry))
    elif damage == "short-losses":
        entry["losses"] = entry["losses"][:3]
        victim.write_text(json.dumps(entry))
    else:
        entry["stop_step"] = 10_000
        victim.write_text(json.dumps(entry))
    assert check_entry(victim)[0] is None
    run_study(runs, tmp_path, workers=1, weights_dir=tmp_path / "weights")
    err = capsys.readouterr().err
    assert victim.name in err and "recomputing" in err
    assert read_all(tmp_path) == read_all(tiny_reference)


def test_a_missing_weights_file_makes_the_run_train_again(tmp_path):
    run = Run("recall", "llama", 0, budget=TINY, compile=False)
    assert run.keeps_weights
    run_study([run], tmp_path, weights_dir=tmp_path / "w", progress=False)
    path = study.weights_path(run, tmp_path / "w")
    first = path.read_bytes()
    path.unlink()
    assert study.load_entry(tmp_path, run, tmp_path / "w") is None
    run_study([run], tmp_path, weights_dir=tmp_path / "w", progress=False)
    assert path.read_bytes() == first  # byte-stable: the same tensors, the same file
    model = study.load_weights(run, tmp_path / "w")
    assert model.lm_head.weight is model.embed_tokens.weight  # stored once, comes back tied


# ---------------------------------------------------------------- faults: a stopped driver,
# two runners on one cache, a failing write

TINY_CLI = ["study", *TINY_ARGS]


def start_study(cache_dir: Path, workers: int) -> subprocess.Popen:
    """`llamanat study` on tiny_runs() in a subprocess, returned once it has stored a run and
    its workers (if any) are running."""
    cmd = [sys.executable, "-m", "llamanat_core.cli", *TINY_CLI, "--cache-dir", str(cache_dir),
           "--workers", str(workers)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "LLAMANAT_COMPILE": "0"}
    proc = subprocess.Popen(cmd, cwd=cache_dir.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not list(cache_dir.glob("runs/*.json")):
        time.sleep(0.02)
    assert proc.poll() is None, f"the study ended before it could be stopped: {proc.stderr.read()[-2000:]}"
    if workers > 1:  # the pool's workers and its resource tracker, there to be checked
        assert len(descendants(proc.pid)) >= workers + 1
    return proc


def resume(cache_dir: Path, monkeypatch, capsys, tiny_reference) -> str:
    """Run the stopped study's command again in this process: it must end in the files of
    an uninterrupted study and nothing else (no partial file, no lock). Returns its stderr."""
    from llamanat_core.cli import main

    done = len(list(cache_dir.glob("runs/*.json")))
    assert 1 <= done < 4, f"the stop should land mid-study, found {done} finished runs"
    for p in cache_dir.glob("runs/*.json"):
        assert check_entry(p)[0] is not None  # what was stored is complete
    monkeypatch.setenv("LLAMANAT_COMPILE", "0")
    capsys.readouterr()
    assert main([*TINY_CLI, "--cache-dir", str(cache_dir), "--workers", "1"]) == 0
    assert read_all(cache_dir) == read_all(tiny_reference)
    left = {p.name for p in cache_dir.rglob("*") if p.is_file()}
    kept = {study.weights_path(r, cache_dir).name for r in tiny_runs() if r.keeps_weights}
    assert kept and left == set(read_all(tiny_reference))
    return capsys.readouterr().err


@on_linux
@pytest.mark.pool
def test_a_running_study_refuses_a_second_and_stops_cleanly_on_sigterm(tiny_reference, tmp_path,
                                                                      monkeypatch, capsys):
    """A second study on the cache of a running one stops at once with one line naming the
    first (reading the cache needs no lock). SIGTERM (a `kill`, a `timeout`, a container
    stop) to the first driver alone: it ends its pool's processes, releases the lock, says
    in one line what it kept and how to resume, and the same command resumes."""
    from llamanat_core.cli import main

    cache = tmp_path / "cache"
    proc = start_study(cache, workers=2)
    try:
        monkeypatch.setenv("LLAMANAT_COMPILE", "0")
        assert main([*TINY_CLI, "--cache-dir", str(cache), "--workers", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err  # refused before training anything
        assert f"another study is running on {cache}: PID {proc.pid} (" in err[0]
        assert "llamanat_core/cli.py study --only sweep" in err[0]
        assert check_entry(next(cache.glob("runs/*.json")))[0] is not None  # reads as ever
        below = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM, proc.stderr.read()[-2000:]
    finally:
        proc.kill()
    err = proc.stderr.read().strip().splitlines()
    proc.stderr.close()
    assert "stopped by SIGTERM" in err[-1] and "run the same command again" in err[-1], err[-3:]
    assert not gone_within(below, 10), "the driver's workers outlived it"
    assert not (cache / "study.lock").exists()
    resume(cache, monkeypatch, capsys, tiny_reference)


@on_linux
@pytest.mark.pool
@pytest.mark.slow  # ~30 s; SIGTERM's stop and resume, above, stay in `make test`
def test_sigkilled_driver_leaves_no_worker_and_the_study_resumes(tiny_reference, tmp_path,
                                                                 monkeypatch, capsys):
    """SIGKILL gives the driver no time to end its pool: each worker notices that its driver
    has gone and exits. The next runner takes over the dead driver's lock and removes a
    write the kill cut short (planted here: the kill rarely lands inside one)."""
    cache = tmp_path / "cache"
    proc = start_study(cache, workers=2)
    below = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert not gone_within(below, 60), "workers outlived their killed driver"
    cut = cache / "runs" / f".{tiny_runs()[0].key}.json.x1y2.tmp"
    cut.write_text('{"record": ')
    err = resume(cache, monkeypatch, capsys, tiny_reference)
    assert f"took over the lock of {cache} from PID {proc.pid}" in err
    assert f"removed {cut}" in err


def test_a_failing_write_names_the_file_and_loses_nothing(tiny_reference, tmp_path, monkeypatch, capsys):
    """The disk fills up (fsync is where a full disk often says so) at the second file:
    one line names the file and the reason, no partial file is left, the stored run
    stays, and the same command resumes."""
    import errno

    from llamanat_core.cli import main

    real_fsync, calls = os.fsync, []

    def full_disk(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    monkeypatch.setenv("LLAMANAT_COMPILE", "0")
    cache = tmp_path / "cache"
    assert main([*TINY_CLI, "--cache-dir", str(cache), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    error = [line for line in err if line.startswith("llamanat study: error")]
    assert len(error) == 1 and error[0].startswith(f"llamanat study: error: cannot write {cache}/")
    assert error[0].endswith(": No space left on device"), error[0]
    assert "stopped by the error below: 1 of 4 runs are stored" in err[-2]
    failed = Path(error[0].split("cannot write ", 1)[1].rsplit(":", 1)[0])
    assert not failed.exists()
    assert [p.name for p in cache.rglob("*") if p.is_file()] == [f"{tiny_runs()[0].key}.json"]
    monkeypatch.setattr(os, "fsync", real_fsync)
    resume(cache, monkeypatch, capsys, tiny_reference)


def test_results_frames_are_tidy(tiny_reference):
    p = plan(("sweep",), seeds=(0,), budget=TINY, compile=False)
    entries = run_study(tiny_runs(), tiny_reference, weights_dir=tiny_reference / "weights", progress=False)
    df = study.frame(p, entries)
    assert len(df) == 4 * len(TINY.checkpoints)  # 12 steps: the stop is the last checkpoint
    assert sorted(df.rope_theta.unique()) == [10.0, 100.0, 10_000.0, 1_000_000.0]
    assert df.groupby("run").final.sum().eq(1).all() and df.groupby("run").at_stop.sum().eq(1).all()
    assert (df.regime == "finite").all() and (df.stop_step == 12).all()
    assert df.censored.all() and df.solve_step.isna().all()  # nothing solves recall in 12 steps
    assert df.test_acc.between(0, 1).all() and df.test_acc_12.between(0, 1).all()
    curves = study.curves_frame(unique_runs(p), entries)
    assert len(curves) == 4 * 12 and list(curves.step.unique()) == list(range(1, 13))
    assert curves.val_acc_8.between(0, 1).all()


def test_chapter_curves_are_the_curves_of_the_runs_a_chapter_read(tiny_reference):
    """Fresh: read from the run files, equal to what the study writes as curves.csv; a run
    whose file is missing is an error naming the file. Committed: only the frame's runs."""
    from llamanat_core.study.results import chapter_curves

    p = plan(("sweep",), seeds=(0,), budget=TINY, compile=False)
    entries = run_study(tiny_runs(), tiny_reference, weights_dir=tiny_reference / "weights", progress=False)
    df = study.frame(p, entries)
    some = df[df.rope_theta.isin([100.0, 10_000.0])]
    got = chapter_curves(some, fresh=True, fresh_dir=tiny_reference)
    want = study.curves_frame(unique_runs(p), entries)
    want = want[want.run.isin(set(some.run))].reset_index(drop=True)
    assert set(got.run) == set(some.run) and len(got) == 2 * 12
    got = got[want.columns].sort_values(["run", "step"]).reset_index(drop=True)
    want = want.sort_values(["run", "step"]).reset_index(drop=True)
    assert got.astype(str).equals(want.astype(str))
    stranger = some.assign(run="0123456789abcdef")
    with pytest.raises(FileNotFoundError, match="0123456789abcdef"):
        chapter_curves(stranger, fresh=True, fresh_dir=tiny_reference)
    committed = study.load_results()
    one = committed[(committed.variant == "mqa") & (committed.seed == 3)]
    curves = chapter_curves(one)
    assert set(curves.run) == set(one.run) and not curves.empty


def test_a_run_past_the_floor_gets_a_row_at_its_stop():
    budget = Budget(steps=40, min_steps=12, eval_every=4, n_train=64, n_val=16, n_test=16,
                    checkpoints=(6, 12))
    run = Run("addition", "llama", 0, budget=budget, compile=False)
    entry, _ = study.train_run(run)
    assert entry["stop_step"] == 40 and entry["solve_step"] is None
    df = study.frame({"matrix": [run]}, {run.key: entry})
    assert list(df.step) == [6, 12, 40]
    assert list(df.final) == [False, True, False] and list(df.at_stop) == [False, False, True]


# ------------------------------------------------------------ the study version

def test_study_version_fingerprint():
    """A change that alters what a run computes must bump STUDY_VERSION (so no stale run
    file is reused) and re-record VERSION_FINGERPRINT: the first losses of a short
    eager fit, compared within verify's tolerance so any CPU passes."""
    run = fingerprint_run()
    losses = training_losses(run.config, run.spec, run.seed, run.budget, len(VERSION_FINGERPRINT),
                             fast=False)
    assert len(VERSION_FINGERPRINT) == 12
    diff = max(abs(a - b) for a, b in zip(losses, VERSION_FINGERPRINT))
    assert diff <= verify_module.TOLERANCE, (
        f"the trainer computes other numbers than study version {STUDY_VERSION} "
        f"(max |Δloss| {diff:.1e}): bump STUDY_VERSION and set VERSION_FINGERPRINT to {losses}")


# ------------------------------------------------------------ verify

def committed_entry(**where):
    for path in sorted((study.STUDY_DIR / "runs").glob("*.json")):
        entry, _ = check_entry(path)
        rec = entry["record"]
        if all(rec.get(k, rec["budget"].get(k)) == v for k, v in where.items()):
            return entry
    pytest.fail(f"no committed run with {where}")


@pytest.mark.parametrize("task", ["addition", "recall"])
def test_verify_accepts_the_committed_runs_on_this_cpu(task):
    """Committed compiled runs, re-fitted eagerly with the plain loop at one thread on
    whatever CPU runs the tests: rounding stays far inside the tolerance."""
    entry = committed_entry(task=task, variant="llama", regime="finite", seed=0)
    check = verify_module.check(entry)
    assert check.ok, verify_module.describe(check)
    assert check.max_diff < verify_module.TOLERANCE / 3


def changed_item(monkeypatch, entry):
    """Replace the first training item of the first batch by another training item."""
    from llamanat_core.data import tasks

    rec = entry["record"]
    first = batch_order(rec["budget"]["n_train"], rec["budget"]["batch_size"], 1,
                                    rec["seed"])[0, 0].item()
    cls = tasks.Addition if rec["task"] == "addition" else tasks.Recall
    original = cls.splits

    def splits(self, n_train=4000, n_val=200, n_test=200):
        s = original(self, n_train, n_val, n_test)
        ids = s.train.ids.clone()
        ids[first] = ids[(first + 1) % len(ids)]
        return tasks.Splits(tasks.TaskData(ids, s.train.answer_len), s.val, s.test)

    monkeypatch.setattr(cls, "splits", splits)


@pytest.mark.parametrize("change", ["lr x 1.01", "init std x 1.01", "one training item"])
@pytest.mark.parametrize("task", ["addition", "recall"])
def test_verify_catches_a_real_change(monkeypatch, task, change):
    entry = json.loads(json.dumps(committed_entry(task=task, variant="llama", regime="finite", seed=0)))
    rec = entry["record"]
    if change == "lr x 1.01":
        rec["budget"]["lr"] *= 1.01
    elif change == "init std x 1.01":
        rec["overrides"].append(["init_std", 0.02 * 1.01])
    else:
        changed_item(monkeypatch, entry)
    check = verify_module.check(entry)
    assert not check.ok, f"{change}: max |Δloss| {check.max_diff:.1e} within the tolerance"


def test_the_verify_window_is_measured_in_learning_rate():
    """50 steps at the puzzles' constant 1e-3; a text run at x16 reaches the same summed
    rate in its warm-up's first 26 steps, so only those are compared."""
    puzzle = committed_entry(task="recall", variant="llama", regime="finite", seed=0)["record"]
    fast = committed_entry(task="text", variant="llama", seed=0, lr_scale=16.0, decay="matrices")["record"]
    slow = committed_entry(task="text", variant="llama", seed=0, lr_scale=4.0, decay="matrices")["record"]
    assert verify_module.verify_window(puzzle) == verify_module.VERIFY_STEPS == 50
    assert verify_module.verify_window(slow) == 50
    assert verify_module.verify_window(fast) == 26
    assert verify_module.verify_window(fast, steps=10) == 10


@pytest.mark.parametrize("change", ["none", "lr x 1.01"])
def test_verify_judges_a_high_rate_text_run_over_its_window(change):
    """The tuned text run at x16: rounding stays inside the tolerance over its window
    (re-fitted for 50 steps it would not), and a 1 % change of its rate is still caught."""
    entry = json.loads(json.dumps(
        committed_entry(task="text", variant="llama", seed=0, lr_scale=16.0, decay="matrices")))
    if change == "lr x 1.01":
        entry["record"]["budget"]["lr"] *= 1.01
        entry["record"]["lr_scale"] *= 1.01
    check = verify_module.check(entry)
    assert check.steps == 26
    assert check.ok == (change == "none"), verify_module.describe(check)


def test_verify_cli_names_what_differs(tmp_path, capsys):
    """A cache whose runs disagree with the code: exit 1, naming the runs."""
    from llamanat_core.cli import main

    run = Run("addition", "llama", 0, budget=TINY, compile=False)
    entry, weights = study.train_run(run)
    entry["losses"][5] += 1e-3  # what a changed trainer would have written
    study.store(run, entry, weights, tmp_path, tmp_path / "w")
    assert main(["verify", "--cache-dir", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert "DIFFERS" in out.out and run.label in out.err
    entry["losses"][5] -= 1e-3
    study.store(run, entry, weights, tmp_path, tmp_path / "w")
    assert main(["verify", "--cache-dir", str(tmp_path)]) == 0


def test_verify_bad_input(tmp_path, capsys):
    from llamanat_core.cli import main

    assert main(["verify", "--cache-dir", str(tmp_path)]) == 2
    assert "no run files" in capsys.readouterr().err
    run = Run("addition", "llama", 0, budget=TINY, compile=False)
    entry, weights = study.train_run(run)
    study.store(run, entry, weights, tmp_path, tmp_path / "w")
    assert main(["verify", "--cache-dir", str(tmp_path), "--runs", "0123456789abcdef"]) == 2
    assert "no committed run with key" in capsys.readouterr().err
    old = dict(entry, record={**entry["record"], "version": STUDY_VERSION - 1})
    (tmp_path / "runs" / f"{record_key(old['record'])}.json").write_text(json.dumps(old))
    assert main(["verify", "--cache-dir", str(tmp_path)]) == 2
    assert "another plan" in capsys.readouterr().err


def test_the_run_files_of_a_plan_are_read_checked_or_named(tiny_reference, tmp_path):
    """`committed_entries(cache, runs)`, what verify and the benchmarks read: every run's
    checked entry by key, in the plan's order, or an error naming how many files are
    absent or damaged and the first of them."""
    runs = tiny_runs()
    shutil.copytree(tiny_reference, tmp_path, dirs_exist_ok=True)
    assert list(study.committed_entries(tmp_path, runs)) == [r.key for r in runs]
    run_path(tmp_path, runs[1]).write_text("{")
    run_path(tmp_path, runs[3]).unlink()
    first = re.escape(runs[1].label)
    with pytest.raises(ValueError, match=rf"^2 of 4 run files in .* e\.g\. {first} \(unreadable"):
        study.committed_entries(tmp_path, runs)


def test_sample_spreads_over_tasks_regimes_and_variants():
    entries = {f"{i:02d}": {"record": {"task": t, "variant": v, "budget": {"regime": r}}}
               for i, (t, r, v) in enumerate((t, r, v) for t in ("addition", "recall")
                                             for r in ("finite", "fresh") for v in ("a", "b", "c"))}
    picked = verify_module.sample_keys(entries, 12)
    assert len(picked) == 12 == len(set(picked))
    picked4 = verify_module.sample_keys(entries, 4)
    groups = {(entries[k]["record"]["task"], entries[k]["record"]["budget"]["regime"]) for k in picked4}
    assert len(groups) >= 2


# ------------------------------------------------------------ the committed study

def test_committed_study_is_complete():
    """Every run of the plan (the first ten seeds, and the added seeds in the cache) is
    cached and valid; the summaries cover all of them; weights are kept for the first ten."""
    p = two_stage.study_plan()
    runs = unique_runs(p)
    assert len(runs) >= 390 and {r.seed for r in runs} >= set(range(10))
    missing = [r.label for r in runs if study.load_entry(study.STUDY_DIR, r) is None]
    assert not missing, f"{len(missing)} runs missing from artifacts/study, e.g. {missing[:3]}"
    df = study.load_results()
    assert set(df.run) == {r.key for r in runs}
    assert df.groupby(["measurement", "run"]).final.sum().eq(1).all()
    assert len(study.load_curves()) == sum(len(e["dense"]) for e in
                                           (study.load_entry(study.STUDY_DIR, r) for r in runs))
    names = {p.name for p in study.WEIGHTS_DIR.glob("*.safetensors")}
    text = _cached_text_runs()
    kept = {study.weights_path(r).name for r in runs + text if r.keeps_weights}
    assert kept <= names
    # the tuned study, still running, keeps seeds 0-2 at each settled bracket's best rate
    # (a file it still owes is trained again by the runner: `weights_owed`) and no other
    from llamanat_core.study.text_recipe import stored_in

    plan = two_stage.tuned_study_plan(stored_in(study.STUDY_DIR))
    tuned = {study.weights_path(r).name for r in plan["tuned"] if r.keeps_weights}
    assert names - kept <= tuned, f"weights no run keeps: {sorted(names - kept - tuned)[:3]}"


def test_every_seed_widens_only_the_default_seeds_of_the_committed_study():
    everything = study.every_seed(study.SEEDS)
    assert everything[:len(study.SEEDS)] == tuple(study.SEEDS) and len(everything) > len(study.SEEDS)
    assert everything == tuple(sorted(set(study.load_results().seed)))
    assert study.every_seed([3, 1]) == (3, 1)  # a reader's choice stays as asked
    assert study.every_seed(study.SEEDS, fresh=True) == tuple(study.SEEDS)


def _cached_text_runs():
    """The text runs in the committed cache: the first ten seeds and any added ones."""
    from llamanat_core.analysis.sequential import ADDED_SEEDS
    from llamanat_core.study.plan import merge_plans
    from llamanat_core.study.text_plan import text_added_plan, text_arms

    candidates = unique_runs(merge_plans(study.text_plan(), text_added_plan(text_arms(), ADDED_SEEDS)))
    return [r for r in candidates if study.load_entry(study.STUDY_DIR, r) is not None]


def test_committed_text_study_matches_its_summary():
    """The text summaries hold exactly the cached text runs, and every run file in the cache
    belongs to the puzzles' plan, the text plan or the tuned text study's (none left over
    from another plan)."""
    from llamanat_core.study import text_recipe

    text = _cached_text_runs()
    assert {r.key for r in text} == set(study.load_text_results().run)
    assert set(study.load_text_curves().run) == {r.key for r in text}
    # the tuned study's run files (their weights land once each bracket settles)
    stored = text_recipe.stored_in(study.STUDY_DIR)
    plan = two_stage.tuned_study_plan(stored)
    tuned = [r for r in unique_runs(plan) if run_path(study.STUDY_DIR, r).exists()]
    planned = {r.key for r in unique_runs(two_stage.study_plan())} | {r.key for r in text} | \
        {r.key for r in tuned}
    assert {p.stem for p in (study.STUDY_DIR / "runs").glob("*.json")} == planned


@pytest.mark.pool
def test_cli_on_committed_tree_has_nothing_to_run(monkeypatch, capsys):
    from llamanat_core.cli import main

    monkeypatch.setenv("LLAMANAT_COMPILE", "1")  # the committed study is compiled
    assert main(["study", "--workers", "2", "--only", "matrix", "length", "sweep", "alphabet"]) == 0
    err = capsys.readouterr().err
    assert "nothing left to run" in err  # every run cached: nothing trains
    assert "running" not in err


def comparisons_arms():
    from llamanat_core.analysis.comparisons import added_seed_arms, decide

    return added_seed_arms(decide(study.load_results()))


def test_cli_study_list_and_bad_input(capsys):
    from llamanat_core.analysis.text_comparisons import decide_text, text_added_arms
    from llamanat_core.cli import main

    def added(lines):
        return [line for line in lines if int(line.split("seed=")[-1]) >= 10]

    assert main(["study", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = [line for line in lines[:-1] if " text" in line]
    puzzles = [line for line in lines[:-1] if " text" not in line]
    # the first ten seeds of every row (the text study's 110 and its 66 learning-rate
    # runs among them), then whichever added seeds are in the cache
    assert len(puzzles) == 390 + len(added(puzzles)) and lines[-1].startswith("kv_cache")
    assert len(text) == 176 + len(added(text))
    assert main(["study", "--list", "--added-seeds"]) == 0
    every = capsys.readouterr().out.splitlines()
    first_ten = study.load_text_results().query("seed < 10")
    text_arms = text_added_arms(decide_text(first_ten))
    assert len(every) == 390 + 30 * len(comparisons_arms()) + 176 + 30 * len(text_arms) + 1
    assert main(["study", "--list", "--added-seeds", "--only", "matrix"]) == 2
    assert "--added-seeds extends the whole study" in capsys.readouterr().err
    assert main(["study", "--steps", "100"]) == 2
    assert "--quick or --cache-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["study", "--seeds", "0,0"])
    assert "must not repeat" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "--variant", "llama", "--task", "recall", "--seed", "-1"])
    assert "non-negative" in capsys.readouterr().err


def test_train_run_trains_on_one_thread_and_restores_the_callers_count(monkeypatch):
    """The tests run on one thread, which `train_run` also uses: the caller here has three, so
    a forgotten restore (or training on the caller's count) shows."""
    seen, real_fit = [], study.training.fit

    def fit(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(study.training, "fit", fit)
    torch.set_num_threads(3)
    try:
        study.train_run(Run("addition", "mqa", 0, budget=TINY, compile=False))
        assert torch.get_num_threads() == 3 and seen == [1]
    finally:
        torch.set_num_threads(1)


def test_runs_are_trained_one_compiled_graph_at_a_time_round_robin():
    """Every run once; the first runs are one per compiled graph (task x architecture; the
    sweep's bases share llama's), so two workers never compile the same graph side by side."""
    runs = unique_runs(plan())
    order = interleave_graphs(runs)
    assert sorted(r.key for r in order) == sorted(r.key for r in runs)
    graph = {r.key: (r.task, r.config.replace(rope_theta=10_000.0)) for r in runs}
    n_graphs = len(set(graph.values()))
    assert n_graphs == 17  # 8 matrix variants x 2 tasks, and untied recall
    assert len({graph[r.key] for r in order[:n_graphs]}) == n_graphs
    assert graph[order[0].key] != graph[order[1].key]
    assert order != runs  # plan order starts with ten seeds of one graph
    eager = [Run("recall", "llama", s, compile=False) for s in (2, 0, 1)]
    assert interleave_graphs(eager + runs[:3])[-3:] == eager  # eager runs keep their order


def test_keep_freed_memory_stops_the_page_faults_of_large_blocks():
    """After it, allocating and filling a 4 MB block again and again reuses the heap
    instead of faulting in new pages each time (about 1,000 faults per block otherwise)."""
    import resource

    from llamanat_core.util import keep_freed_memory

    if not keep_freed_memory():
        pytest.skip("not glibc: the allocator setting does not apply")
    for _ in range(3):
        torch.empty(1 << 20).fill_(1.0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        torch.empty(1 << 20).fill_(1.0)  # 4 MB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 200


def test_sample_covers_every_kind_of_text_run():
    """A tuned run at each size and a run of the first text study each find a place in a
    small sample, however many puzzle groups sort before them."""
    def rec(task, variant, **extra):
        budget = {"regime": "finite"} if task != "text" else {k: v for k, v in extra.items() if k == "decay"}
        return {"record": {"task": task, "variant": variant, "budget": budget,
                           **{k: v for k, v in extra.items() if k == "size"}}}
    entries = {f"a{i:02d}": rec("addition", f"v{i}") for i in range(10)}
    entries |= {"t0": rec("text", "llama"), "t1": rec("text", "llama", decay="matrices"),
                "t2": rec("text", "mqa", decay="matrices", size="M")}
    picked = verify_module.sample_keys(entries, 4)
    assert {"t0", "t1", "t2"} <= set(picked) and len(picked) == 4
    # without the size and recipe in what a sample covers, one text run would stand for all
    assert len({verify_module.run_kind(entries[k]["record"]) for k in picked}) == 4
