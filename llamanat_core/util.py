"""Small helpers every module needs once: atomic file writes and a thread-count scope."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` completely or not at all.

    The bytes go to a uniquely named temporary file in the same folder, are flushed to
    disk, and only then renamed over `path` (a rename within one file system is atomic),
    so a reader or a killed process never sees half a file. The file gets the ordinary
    permissions of the umask, not mkstemp's private 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text with Unix newlines."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def torch_threads(n: int | None):
    """Run a block with `n` torch threads and restore the previous count afterwards.

    Float sums split over threads are added in a different order, so the thread count
    is part of what makes a run reproducible. `None` leaves the count alone.
    """
    import torch

    saved = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
