"""Where runs are trained. An executor takes the runs left to do and yields
(run, entry, weights) as each finishes, in any order; the driver (`run_study`) writes
every result into the cache itself, so workers need no shared file system and a killed
driver loses only the runs in flight. Within `stop_on_signals` (which `run_study` holds),
SIGTERM or SIGINT to the driver ends the executor's workers instead of orphaning them.

`local` is a pool of one-thread worker processes on this machine (the default).
`ray` makes each run a Ray task (one CPU, one torch thread), on a Ray instance it starts
here with `workers` CPUs, or on a running cluster at `address`. Ray is imported only
when asked for, so the package works without it.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from multiprocessing import get_context
from pathlib import Path

import torch

from ..paths import PACKAGE_DIR
from .run import Run
from .training import train_run

Result = tuple[Run, dict, "bytes | None"]


class Stopped(KeyboardInterrupt):
    """The driver was sent SIGTERM or SIGINT: a KeyboardInterrupt that names the signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` in this thread instead of ending
    the process outright (SIGTERM's default), so the executors' clean-up runs and ends
    their workers. Yields the signals received (Ray re-raises `Stopped` as a plain
    KeyboardInterrupt). Later signals are ignored until the block ends, so the clean-up
    is not cut short. Off the main thread (where Python cannot catch signals) it does nothing."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        received.append(signum)
        raise Stopped(signum)

    saved = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield received
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _restore_handlers(handlers: dict) -> None:
    """Put back signal handlers (`stop_on_signals`'s) that ray.init replaced: its SIGTERM
    handler exits the process at once, and a C-level one of Ray's aborts it."""
    if threading.current_thread() is threading.main_thread():
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)


DRIVER_CHECK = 1.0  # seconds between a local worker's checks that its driver still runs


def _exit_when_orphaned(driver: int) -> None:
    """A worker's watchdog: once the driver has gone (SIGKILL gives it no time to end its
    pool) the worker is re-parented, and it exits rather than train for nobody."""
    while os.getppid() == driver:
        time.sleep(DRIVER_CHECK)
    os._exit(1)


def _worker_init(driver: int) -> None:
    torch.set_num_threads(1)
    # Ctrl-C reaches the whole process group; the driver alone decides what stops, and how
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(driver,), daemon=True,
                     name="driver-watchdog").start()


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's processes now: the runs in flight are dropped, not awaited (a
    full-budget run takes minutes). The pool has no public call for this before Python 3.14."""
    for process in list((pool._processes or {}).values()):
        process.terminate()


def local(todo: list[Run], workers: int = 1) -> Iterator[Result]:
    """In this process (one worker) or a pool of `workers` spawned processes. Interrupted
    (a signal, an error storing a result), the pool's processes are ended at once."""
    if workers == 1:
        for run in todo:
            entry, weights = train_run(run)
            yield run, entry, weights
        return
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_worker_init,
                               initargs=(os.getpid(),))
    try:
        futures = {pool.submit(train_run, run): run for run in todo}
        for fut in as_completed(futures):
            entry, weights = fut.result()
            yield futures[fut], entry, weights
    except BaseException:  # GeneratorExit too: the consumer stopped early
        _end_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- Ray

class ExecutorError(ValueError):
    """The executor cannot start: a one-line message that says what to do."""


CONNECT_TIMEOUT = 10.0  # seconds to wait for a cluster's head to answer
MAX_RETRIES = 3  # a task whose worker process dies is run again, up to this many times
# Ray 2.60 advertises and binds a new node on the machine's network address; with its
# single-machine mode (the default on macOS and Windows) every server binds 127.0.0.1.
_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# Ray gives a new node a fixed 30 s to register; on a loaded machine (a 2-core CI runner
# training on its other core) that can pass, so a local start is tried again.
_STARTUP_TIMEOUT = "timed out during startup"
START_ATTEMPTS = 3


def import_ray():
    try:
        import ray  # optional and heavy: only with --executor ray
    except ImportError:
        raise ExecutorError("Ray is not installed in this environment; install the project's "
                            "requirements (pip install -r requirements.txt) or use --executor local"
                            ) from None
    return ray


def check_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail within `timeout` seconds unless something listens at HOST:PORT (ray.init would
    keep retrying an unreachable head for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ExecutorError(f"--address must be the head's HOST:PORT (its GCS port, 6379 unless "
                            f"`ray start --head --port` said otherwise), got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        why = e.strerror or e.__class__.__name__
        raise ExecutorError(f"no Ray cluster answers at {address} ({why}); start one with "
                            f"`ray start --head` and pass the address it prints, or leave out "
                            f"--address to start a Ray instance on this machine") from None


def check_ray(address: str | None = None, timeout: float = CONNECT_TIMEOUT):
    """What the command line checks before any work: Ray importable, the head reachable."""
    ray = import_ray()
    if address is not None:
        check_address(address, timeout)
    return ray


def _stop_half_started(error: BaseException) -> None:
    """Stop the servers of a node whose start timed out. ray.init drops the node object on
    the error, so it is found in the traceback (the frame of its constructor)."""
    from ray._private.node import Node  # optional: only with --executor ray

    tb = error.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
            return
        tb = tb.tb_next


def start_local(cpus: int, temp_dir: str | Path | None = None) -> None:
    """A new Ray instance on this machine: `cpus` CPUs, servers on 127.0.0.1 only, no
    dashboard, token authentication on (Ray 2.60's default for a new local instance; the
    token is read from, or generated into, ~/.ray/auth_token unless RAY_AUTH_TOKEN is set).
    `temp_dir` holds its sockets and logs (keep it short: Unix socket paths are limited to
    about 107 characters). A start that times out (`_STARTUP_TIMEOUT`) has its servers
    stopped and is tried again, `START_ATTEMPTS` times in all."""
    ray = import_ray()
    from ray._private import ray_constants  # optional: only with --executor ray

    saved = ray_constants.ENABLE_RAY_CLUSTER, os.environ.get(_SINGLE_MACHINE)
    ray_constants.ENABLE_RAY_CLUSTER = False  # this process
    os.environ[_SINGLE_MACHINE] = "0"  # the servers it starts
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                ray.init(num_cpus=cpus, include_dashboard=False, logging_level="warning",
                         _temp_dir=None if temp_dir is None else str(temp_dir))
                return
            except Exception as e:
                if _STARTUP_TIMEOUT not in str(e):
                    raise
                _stop_half_started(e)
                if attempt == START_ATTEMPTS:
                    raise ExecutorError(
                        f"Ray's local instance did not start: its node failed to register "
                        f"within Ray's 30 s, {START_ATTEMPTS} times (is the machine "
                        f"overloaded?); try again, or use --executor local") from None
                print(f"Ray's local instance did not start within 30 s (busy machine?); "
                      f"trying again ({attempt + 1} of {START_ATTEMPTS})", file=sys.stderr)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved[0]
        if saved[1] is None:
            os.environ.pop(_SINGLE_MACHINE, None)
        else:
            os.environ[_SINGLE_MACHINE] = saved[1]


def connect(address: str, timeout: float = CONNECT_TIMEOUT, ship_code: bool = True) -> None:
    """Join the running cluster whose head is at `address` as its driver. `ship_code` sends
    this llamanat_core with the job, so nodes need only the requirements and run exactly
    the driver's code."""
    ray = import_ray()
    check_address(address, timeout)
    env = {"py_modules": [str(PACKAGE_DIR)], "excludes": ["__pycache__"]} if ship_code else None
    try:
        ray.init(address=address, logging_level="warning", runtime_env=env)
    except Exception as e:  # e.g. no token for a cluster with token authentication
        first = (str(e).strip().splitlines() or [e.__class__.__name__])[0]
        raise ExecutorError(f"could not join the Ray cluster at {address}: {first}") from None


def _call(task: Callable[[Run], tuple[dict, bytes | None]], run: Run):
    return task(run)


def ray_executor(todo: list[Run], workers: int = 1, address: str | None = None,
                 temp_dir: str | Path | None = None, max_retries: int = MAX_RETRIES,
                 ship_code: bool = True, timeout: float = CONNECT_TIMEOUT,
                 task: Callable[[Run], tuple[dict, bytes | None]] = train_run) -> Iterator[Result]:
    """Each run a Ray task of one CPU (`train_run` sets one torch thread), retried up to
    `max_retries` times if its worker process dies; results come back to this process.

    Without `address` it starts a local instance of `workers` CPUs (`start_local`) and
    shuts it down at the end; with one it joins that cluster (`workers` is then the
    cluster's business). If this process is already connected to Ray it uses that
    connection and leaves it open. `ship_code`: see `connect`. `task` replaces `train_run`
    (tests wrap it)."""
    ray = import_ray()
    if address is not None:
        check_address(address, timeout)  # even when this process is already connected
    owned = not ray.is_initialized()
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    if owned:
        if address is None:
            start_local(workers, temp_dir)
        else:
            connect(address, timeout, ship_code)
        _restore_handlers(handlers)
    remote = ray.remote(_call).options(num_cpus=1, max_retries=max_retries)
    pending: list = []
    try:
        runs = {remote.remote(task, run): run for run in todo}
        pending = list(runs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                entry, weights = ray.get(ref)
                yield runs[ref], entry, weights
    finally:  # interrupted: drop the tasks not yet returned, ending the workers running them
        for ref in pending:
            with suppress(Exception):  # a Ray that is itself going down
                ray.cancel(ref, force=True)
        if owned:
            ray.shutdown()


EXECUTORS = {"local": local, "ray": ray_executor}
