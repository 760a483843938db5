"""One runner per cache folder.

A study that has runs to train holds `study.lock` in its cache folder: the file names the
holder (its PID and command line) and is locked with `flock`, which the kernel releases
when the holder ends in any way, SIGKILL included. So a lock file nobody holds is stale
(its holder is dead) and the next runner takes it over; a held one refuses a second
runner at once, with one line naming the first. Reading a cache (`load_results`, the
chapters, `llamanat verify`) never takes the lock. POSIX only (Linux, macOS).
"""
from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..util import WriteError

LOCK_NAME = "study.lock"
_READ_TRIES = 20  # a new holder writes its line just after locking: wait up to 1 s for it


class CacheLocked(ValueError):
    """Another runner holds the cache folder: a one-line message naming it."""


def lock_path(cache_dir: Path | str) -> Path:
    return Path(cache_dir) / LOCK_NAME


def _holder(fd: int, tries: int = 1) -> tuple[str, str] | None:
    """(PID, command) as a lock file names them, or None if it is empty."""
    for attempt in range(tries):
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        if text or attempt == tries - 1:
            break
        time.sleep(0.05)
    pid, _, command = text.partition("\n")
    return (pid, command) if text else None


def _open_locked(path: Path) -> int:
    """A descriptor of `path` holding its flock; CacheLocked if another process holds it."""
    import fcntl  # POSIX only: the lock is taken where it exists

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, command = _holder(fd, _READ_TRIES) or ("(not yet written)", "")
            os.close(fd)
            raise CacheLocked(f"another study is running on {path.parent}: PID {pid} ({command}); "
                              f"wait for it to end, or stop it with `kill {pid}`, then run this "
                              f"again") from None
        except BaseException:
            os.close(fd)
            raise
        # a releasing holder unlinks the file before unlocking it: locking the old inode
        # after that proves nothing, so try again on the file now at `path`
        with suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        os.close(fd)


@contextmanager
def cache_lock(cache_dir: Path | str, say: Callable[[str], None] = lambda msg: None) -> Iterator[Path]:
    """Hold the lock of `cache_dir` for the block; `say` hears of a stale lock taken over.
    CacheLocked if another runner holds it; WriteError if the folder cannot take the file."""
    path = lock_path(cache_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_locked(path)
    except CacheLocked:
        raise
    except OSError as e:
        raise WriteError(path, e) from None
    try:
        stale = _holder(fd)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{shlex.join(sys.argv)}\n".encode(), 0)
        except OSError as e:
            raise WriteError(path, e) from None
        if stale:
            say(f"took over the lock of {path.parent} from PID {stale[0]} ({stale[1]}), which "
                f"is no longer running")
        yield path
    finally:
        with suppress(OSError):
            path.unlink()  # before unlocking: see `_open_locked`
        os.close(fd)
