"""Where the repository keeps things: the one definition of its root and its folders."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS_DIR = ROOT / "artifacts"
CORPUS_DIR_ENV = "LLAMANAT_CORPUS_DIR"


def corpus_dir() -> Path:
    """Where the text corpus is unpacked: $LLAMANAT_CORPUS_DIR if set (tests point it at a
    temporary folder), else `.corpus/` (ignored by git: the text is never committed)."""
    return Path(os.environ.get(CORPUS_DIR_ENV) or ROOT / ".corpus")
