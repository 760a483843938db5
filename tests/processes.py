"""The processes a test started, read from /proc (Linux): which are below a driver, and
whether they have ended."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

on_linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


def descendants(pid: int) -> set[int]:
    """The processes below `pid` (its workers, their helpers), read from /proc."""
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended while we read
            continue
        children.setdefault(ppid, set()).add(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        new = children.get(todo.pop(), set()) - found
        found |= new
        todo += new
    return found


def running(pids: set[int]) -> set[int]:
    """Those of `pids` still running (a zombie has ended: it holds no memory, runs nothing)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def gone_within(pids: set[int], seconds: float) -> set[int]:
    """Wait up to `seconds` for `pids` to end; return those still running then, after
    killing them (a failing test must not leave them training)."""
    deadline = time.monotonic() + seconds
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = running(pids)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left
