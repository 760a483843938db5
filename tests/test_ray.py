"""The Ray executor: the same run files as the local pool, a killed worker's run retried
and written once, a killed driver resumed to the same files, and bad input refused in one
line with exit code 2.

One local Ray instance (2 CPUs) serves the module's slow tier (`make test-slow`: starting
Ray and training through it take about a minute of `make test`'s five); the killed driver
starts its own beside it. Bad input and the start-up retry need no instance and stay in
`make test`. Each runs with its own token (RAY_AUTH_TOKEN, so
nothing is written to ~/.ray) and a short temporary folder (Ray's Unix socket paths are
limited to about 107 characters).
"""
from __future__ import annotations

import collections
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from processes import descendants, gone_within, on_linux
from tiny_study import TINY_ARGS as TINY
from tiny_study import read_all, tiny_runs

from llamanat_core.cli import main
from llamanat_core.study import check_entry, run_study, weights_path
from llamanat_core.study import results as results_module
from llamanat_core.study.executors import ExecutorError, check_address, start_local

pytestmark = pytest.mark.pool  # one worker runs this file (ONE_WORKER in conftest.py)

def study(cache_dir: Path, **options) -> dict[str, dict]:
    cache_dir = Path(cache_dir)
    return run_study(tiny_runs(), cache_dir, workers=2, weights_dir=cache_dir / "weights",
                     progress=False, **options)


@pytest.fixture(scope="module")
def token():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        mp.delenv("RAY_AUTH_MODE", raising=False)  # Ray sets it when it enables tokens; undone after
        yield os.environ["RAY_AUTH_TOKEN"]


@pytest.fixture(scope="module")
def ray_instance(token, tmp_path_factory):
    """One local instance, started as `--executor ray` starts one, for the whole module."""
    import ray

    temp_dir = tmp_path_factory.mktemp("r")
    assert len(str(temp_dir)) < 50, f"{temp_dir} is too long for Ray's socket paths"
    start_local(2, temp_dir)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def reference(tiny_reference):
    return read_all(tiny_reference)


@pytest.fixture
def stores(monkeypatch):
    """Counts the run files the driver writes, by key."""
    counts = collections.Counter()
    store = results_module.store

    def counting(run, *args, **kwargs):
        counts[run.key] += 1
        return store(run, *args, **kwargs)

    monkeypatch.setattr(results_module, "store", counting)
    return counts


@pytest.mark.slow  # a Ray instance: the slow tier
def test_local_instance_is_private(ray_instance):
    """Servers on 127.0.0.1, token authentication on, no dashboard."""
    from ray._raylet import AuthenticationMode, get_authentication_mode

    ctx = ray_instance.get_runtime_context()
    assert ctx.gcs_address.startswith("127.0.0.1:")
    assert get_authentication_mode() == AuthenticationMode.TOKEN
    assert ray_instance.cluster_resources()["CPU"] == 2
    assert ray_instance.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"


@pytest.mark.slow  # a Ray instance: the slow tier
def test_ray_writes_the_same_files_as_the_local_pool(ray_instance, reference, tmp_path, stores):
    study(tmp_path, executor="ray")
    assert read_all(tmp_path) == reference  # run files (seconds aside) and weights, byte for byte
    assert sorted(stores.values()) == [1] * len(tiny_runs())
    stores.clear()
    study(tmp_path, executor="ray")  # resumes: everything cached, nothing runs
    assert not stores


@pytest.mark.slow  # a Ray instance: the slow tier
def test_a_killed_worker_is_retried_and_written_once(ray_instance, reference, tmp_path, stores):
    started = tmp_path / "started"
    started.mkdir()
    folder = str(started)

    def reporting(run):  # a closure: Ray ships it by value, so workers need not import tests/
        import os
        from pathlib import Path

        from llamanat_core.study.training import train_run

        Path(folder, f"{run.key}.{os.getpid()}").touch()  # this task runs in this worker
        return train_run(run)

    killed = []

    def kill_the_first_worker():
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for f in started.iterdir():
                key, pid = f.name.split(".")
                os.kill(int(pid), signal.SIGKILL)  # the task has just begun its fit
                killed.append(key)
                break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_worker, daemon=True)
    killer.start()
    cache = tmp_path / "cache"
    study(cache, executor="ray", task=reporting)
    killer.join()
    assert killed, "no worker was killed"
    attempts = collections.Counter(f.name.split(".")[0] for f in started.iterdir())
    assert attempts[killed[0]] >= 2, "the killed worker's run was not run again"
    assert read_all(cache) == reference  # every file valid (check_entry) and as the local pool's
    assert sorted(stores.values()) == [1] * len(tiny_runs())  # none written twice


def start_ray_driver(cache: Path) -> subprocess.Popen:
    """`llamanat study --executor ray` with its own local Ray instance on the tiny plan, in a
    subprocess, returned once it has stored a run."""
    env = {**os.environ, "LLAMANAT_COMPILE": "0"}
    cmd = [sys.executable, "-m", "llamanat_core.cli", "study", "--executor", "ray",
           "--workers", "1", *TINY, "--cache-dir", str(cache)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not list(cache.glob("runs/*.json")):
        time.sleep(0.02)
    if proc.poll() is not None:
        with proc.stderr:
            pytest.fail(f"the Ray driver ended before it could be stopped: {proc.stderr.read()[-2000:]}")
    return proc


@pytest.mark.slow  # a second Ray instance in a subprocess: about a minute on 2 cores; the local
# pool's killed study (test_study) covers the same resume in `make test`
def test_a_killed_driver_resumes_to_the_same_files(ray_instance, token, reference, tmp_path, stores):
    """A driver with its own local Ray instance is killed mid-plan (its instance dies with
    it); the study resumes, through Ray, to the local pool's files."""
    cache = tmp_path / "cache"
    runs_dir = cache / "runs"
    proc = start_ray_driver(cache)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver; the module's own instance lives on
    proc.wait()
    proc.stderr.close()
    done = {p.stem for p in runs_dir.glob("*.json")}
    assert 1 <= len(done) < 4, f"the kill should land mid-plan, found {len(done)} finished runs"
    for p in runs_dir.glob("*.json"):
        assert check_entry(p)[0] is not None  # the runs written before the kill are complete
    sweep = tiny_runs()
    run_study(sweep, cache, workers=2, weights_dir=cache / "weights", progress=False, executor="ray")
    assert set(stores) == {r.key for r in sweep} - done  # only what was missing
    assert sorted(stores.values()) == [1] * len(stores)
    wanted = {f"{r.key}.json" for r in sweep} | {weights_path(r, cache).name
                                                  for r in sweep if r.keeps_weights}
    assert read_all(cache) == {k: v for k, v in reference.items() if k in wanted}


@on_linux
@pytest.mark.slow  # a Ray instance of its own in a subprocess: about a minute on 2 cores
def test_sigterm_to_a_ray_driver_ends_its_instance(token, tmp_path):
    """SIGTERM to a driver that started its own Ray instance: it stops as the local pool's
    does (one line, the shell's exit code for SIGTERM, the lock released), and no process
    it started (Ray's servers, agents, workers) outlives it."""
    cache = tmp_path / "cache"
    proc = start_ray_driver(cache)
    below = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)
    try:
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM, proc.stderr.read()[-2000:]
        err = proc.stderr.read().strip().splitlines()
    finally:
        proc.kill()
        proc.stderr.close()
    assert "stopped by SIGTERM" in err[-1], err[-3:]
    assert not gone_within(below, 30), "processes of the Ray driver outlived it"
    assert not (cache / "study.lock").exists()


# ---------------------------------------------------------------- bad input: one line, exit 2

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once closed


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_an_unreachable_address_fails_fast(tmp_path, capsys):
    t0 = time.monotonic()
    address = f"127.0.0.1:{closed_port()}"
    assert main(["study", "--executor", "ray", "--address", address, *TINY,
                 "--cache-dir", str(tmp_path)]) == 2
    line = error_line(capsys)
    assert f"no Ray cluster answers at {address}" in line and "ray start --head" in line
    assert time.monotonic() - t0 < 15
    assert not (tmp_path / "runs").exists()  # nothing ran
    with pytest.raises(ExecutorError, match="no Ray cluster answers"):
        run_study(tiny_runs(), tmp_path, weights_dir=tmp_path / "w", progress=False, executor="ray",
                  address=address, timeout=2)
    with pytest.raises(ExecutorError, match="HOST:PORT"):
        check_address("no-port-here")


def test_bad_executor_input(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as e:  # argparse: usage and the choices
        main(["study", "--executor", "dask", *TINY, "--cache-dir", str(tmp_path)])
    assert e.value.code == 2
    assert "invalid choice: 'dask'" in capsys.readouterr().err
    assert main(["study", "--address", "127.0.0.1:6379", *TINY, "--cache-dir", str(tmp_path)]) == 2
    assert "add --executor ray" in error_line(capsys)
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed: `import ray` fails
    assert main(["study", "--executor", "ray", *TINY, "--cache-dir", str(tmp_path)]) == 2
    line = error_line(capsys)
    assert "Ray is not installed" in line and "pip install -r requirements.txt" in line
    assert not (tmp_path / "runs").exists()
    # the default executor needs no Ray at all
    assert main(["study", *TINY, "--cache-dir", str(tmp_path), "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_a_local_start_that_times_out_is_stopped_and_tried_again(monkeypatch, capsys):
    """Ray gives a new node 30 s to register; on a busy machine the start is tried again,
    the half-started servers stopped first, and after the last attempt the error says so."""
    import ray
    from ray._private.node import Node

    from llamanat_core.study import executors

    stopped, attempts = [], []

    class SlowNode(Node):  # what ray.init builds, failing as Ray's does on a busy machine
        def __init__(self):
            raise Exception("The current node timed out during startup. This could happen "
                            "because some of the raylet failed to startup or the GCS has "
                            "become overloaded.")

        def kill_all_processes(self, **options):
            stopped.append(options)

    def init(fails: int):
        def fake(**options):
            attempts.append(options["num_cpus"])
            if len(attempts) <= fails:
                SlowNode()
        return fake

    monkeypatch.setattr(ray, "init", init(fails=1))
    start_local(2)
    assert attempts == [2, 2] and len(stopped) == 1
    assert "trying again (2 of 3)" in capsys.readouterr().err

    attempts.clear()
    stopped.clear()
    monkeypatch.setattr(ray, "init", init(fails=executors.START_ATTEMPTS))
    with pytest.raises(ExecutorError, match="did not start.*3 times.*--executor local"):
        start_local(1)
    assert len(attempts) == len(stopped) == executors.START_ATTEMPTS

    def other_error(**options):  # anything else is not retried
        attempts.append(options)
        raise ValueError("object_store_memory too small")

    attempts.clear()
    monkeypatch.setattr(ray, "init", other_error)
    with pytest.raises(ValueError, match="object_store_memory"):
        start_local(1)
    assert len(attempts) == 1
