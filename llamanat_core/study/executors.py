"""Where runs are trained. An executor takes the runs left to do and yields
(run, entry, weights) as each finishes, in any order; the driver (`run_study`) writes
every result into the cache itself, so workers need no shared file system and a killed
driver loses only the runs in flight.

`local` is a pool of one-thread worker processes on this machine (the default).
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

import torch

from .cache import execute
from .plan import Run

Result = tuple[Run, dict, "bytes | None"]


def _worker_init() -> None:
    torch.set_num_threads(1)


def local(todo: list[Run], workers: int = 1) -> Iterator[Result]:
    """In this process (one worker) or a pool of `workers` spawned processes."""
    if workers == 1:
        for run in todo:
            entry, weights = execute(run)
            yield run, entry, weights
        return
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_worker_init)
    try:
        futures = {pool.submit(execute, run): run for run in todo}
        for fut in as_completed(futures):
            entry, weights = fut.result()
            yield futures[fut], entry, weights
    finally:  # interrupted: drop what has not started, let the runs in flight end
        pool.shutdown(wait=True, cancel_futures=True)


EXECUTORS = {"local": local}
