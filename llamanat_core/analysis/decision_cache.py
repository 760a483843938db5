"""The study's decisions, computed once per version of the code and of the data.

`comparisons.decide` on the whole committed study takes a few seconds (two analyses, every
interval inverted from an exact test), and every chapter that shows a verdict asks for the
same frame in a kernel of its own (and `two_stage.study_plan` decides the first stage
whenever the study's plan is read). `decided` keeps each answer on disk under a key made of
the package's source and the results it was given, so a chapter reads the frame the first
chapter computed, and any change to either computes it again. The folder is a user
cache outside the repository (`paths.decisions_cache_dir`); a file that cannot be read is
computed again and rewritten; a folder that cannot be written costs only the time.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import pandas as pd

from ..paths import PACKAGE_DIR, decisions_cache_dir


@functools.lru_cache(maxsize=1)
def code_fingerprint(package: Path = PACKAGE_DIR) -> str:
    """A hash of every Python file of the package: any edit gives a new key."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def frame_fingerprint(df: pd.DataFrame) -> str:
    """A hash of a frame's columns, dtypes, index and every value."""
    h = hashlib.sha256(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    return h.hexdigest()


def decided(results: pd.DataFrame, decide, name: str, folder: Path | None = None) -> pd.DataFrame:
    """`decide(results)`, read from the cache when this code has already decided these
    results under `name` (the function and its arguments, as the caller names them)."""
    folder = Path(folder or decisions_cache_dir())
    key = hashlib.sha256(f"{name}|{code_fingerprint()}|{frame_fingerprint(results)}".encode()).hexdigest()
    path = folder / f"{key[:32]}.pkl"
    try:
        return pd.read_pickle(path)
    except Exception:  # noqa: BLE001 - none yet, cut short, from another pandas: compute it
        pass
    out = decide(results)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(fd)
        out.to_pickle(tmp)
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a file
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return out


__all__ = ["code_fingerprint", "decided", "frame_fingerprint"]
