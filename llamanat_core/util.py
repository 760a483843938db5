"""Small helpers every module needs once: atomic file writes, a thread-count scope, and
the allocator setting of a training process."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path


class WriteError(OSError):
    """A file could not be written (no space, a read-only folder, ...): one line naming the
    file and the reason; `errno` is the cause's."""

    def __init__(self, path: Path | str, cause: OSError):
        super().__init__(f"cannot write {path}: {cause.strerror or cause}")
        self.errno = cause.errno


PARTIAL_SUFFIX = ".tmp"  # the temporary files of `atomic_write_bytes`, hidden: .NAME.XXXX.tmp


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` completely or not at all.

    The bytes go to a uniquely named temporary file in the same folder, are flushed to
    disk, and only then renamed over `path` (a rename within one file system is atomic),
    so a reader or a killed process never sees half a file. The file gets the ordinary
    permissions of the umask, not mkstemp's private 0600. A write that fails (a full disk
    often says so only at fsync) removes the temporary file and raises `WriteError`.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            raise WriteError(path, e) from None
        raise


def remove_partial_writes(folder: Path | str) -> list[Path]:
    """Delete the temporary files a process killed inside `atomic_write_bytes` left in
    `folder` (SIGKILL or a power cut skip its clean-up); return them. Only safe while no
    other process writes there (the study runs it under its cache lock)."""
    folder = Path(folder)
    found = sorted(folder.glob(f".*{PARTIAL_SUFFIX}")) if folder.is_dir() else []
    for p in found:
        p.unlink(missing_ok=True)
    return found


def atomic_write_text(path: Path | str, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text with Unix newlines."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def torch_threads(n: int | None):
    """Run a block with `n` torch threads and restore the previous count afterwards.

    Float sums split over threads are added in a different order, so the thread count
    is part of what makes a run reproducible. `None` leaves the count alone.
    """
    import torch  # the file helpers here need no torch: it loads on use

    saved = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def keep_freed_memory() -> bool:
    """Let glibc's allocator keep freed memory for reuse instead of returning it.

    By default glibc serves every block above a threshold (128 KiB to start with) with
    fresh pages from the kernel and hands them back on free, so an operation on a 1 MB
    activation page-faults on every call. An evaluation forward pass on 200 items does
    thousands of those (about 4,500 at 8 pairs, a quarter of its time here). Raising the
    mmap and trim thresholds makes freed blocks stay in the heap for the next operation.
    This changes how memory is found, never what is computed. Returns whether it applied
    (False where the C library is not glibc).
    """
    import ctypes  # only where the allocator is tuned
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, 32 << 20) and mallopt(m_trim_threshold, 1 << 30))
