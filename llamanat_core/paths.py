"""Where the repository keeps things: the one definition of its root and every folder or
file the package reads or writes by default. Every other module imports its paths here."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "llamanat_core"  # shipped whole to a Ray cluster's nodes
CHAPTERS_DIR = ROOT / "chapters"  # the MyST sources
ARTIFACTS_DIR = ROOT / "artifacts"  # everything committed that the code made
STUDY_DIR = ARTIFACTS_DIR / "study"  # the committed study: run files, results.csv, curves.csv
WEIGHTS_DIR = ARTIFACTS_DIR / "weights"  # the study's kept weights
ALPHABET_WEIGHTS_DIR = WEIGHTS_DIR / "alphabet"  # the alphabet chapter's replayed checkpoints
KV_TIMING_PATH = STUDY_DIR / "kv_timing.json"  # the KV-cache timings and the machine they are from
KV_TEXT_TIMING_PATH = STUDY_DIR / "kv_text_timing.json"  # generating text with and without it
NGRAM_BASELINES_PATH = STUDY_DIR / "ngram_baselines.json"  # the counted models' held-out loss on text
FIGURES_DIR = ARTIFACTS_DIR / "figures"
DIAGRAM_PATH = FIGURES_DIR / "decoder.png"  # the README's picture (`make figures`)
QUICK_DIR = Path(".quick")  # `llamanat study --quick`: relative to where it is run
FRESH_DIR = ROOT / ".fresh"  # a reader's own re-runs; never committed
FRESH_CHAPTERS_DIR = FRESH_DIR / "chapters"  # `llamanat chapters` with parameters
FRESH_DIR_ENV = "LLAMANAT_FRESH_DIR"
CORPUS_DIR_ENV = "LLAMANAT_CORPUS_DIR"
CACHE_DIR_ENV = "LLAMANAT_CACHE_DIR"


def fresh_runs_dir() -> Path:
    """Where a reader's fresh=True runs go: $LLAMANAT_FRESH_DIR if set (the chapter runner
    sets it, tests point it at a temporary folder), else `.fresh/`."""
    return Path(os.environ.get(FRESH_DIR_ENV) or FRESH_DIR)


def corpus_dir() -> Path:
    """Where the text corpus is unpacked: $LLAMANAT_CORPUS_DIR if set (tests point it at a
    temporary folder), else `.corpus/` (ignored by git: the text is never committed)."""
    return Path(os.environ.get(CORPUS_DIR_ENV) or ROOT / ".corpus")


def decisions_cache_dir() -> Path:
    """Where decisions already computed are kept (`analysis.decision_cache`): outside the
    repository, as caches are, so neither git nor the tests' check on the working tree
    sees them: $LLAMANAT_CACHE_DIR, else $XDG_CACHE_HOME/llamanat, else ~/.cache/llamanat,
    each with a `decisions` folder. Their keys hold the code and the data, so clones share it."""
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get(CACHE_DIR_ENV) or user_cache / "llamanat") / "decisions"
