"""The committed study's rules: where it lives, where its weights go, that it is compiled."""
from __future__ import annotations

from pathlib import Path

from ..paths import STUDY_DIR, WEIGHTS_DIR
from ..train.compiled import compile_default


def is_committed(cache_dir: Path) -> bool:
    """Whether `cache_dir` is the committed study's folder (artifacts/study)."""
    return Path(cache_dir).resolve() == STUDY_DIR.resolve()


def study_weights_dir(cache_dir: Path) -> Path:
    """Where a study keeps its weights: the committed study's in artifacts/weights, any
    other beside its run files (so a scratch study never writes into the repository)."""
    return WEIGHTS_DIR if is_committed(cache_dir) else Path(cache_dir) / "weights"


def study_compile(committed: bool) -> bool:
    """Whether a study's puzzle runs train compiled: the committed study always is; any
    other (a reader's fresh runs, a separate cache) follows LLAMANAT_COMPILE. Compiled and
    eager steps round differently, so the choice is part of every run's key."""
    return True if committed else compile_default()
