"""The study: the measurement plan, its resumable run cache, the executors that train
runs, the results as pandas, and the early-trajectory check of committed runs.

plan.py (which runs) -> executors.py (where they train) -> cache.py (one file per run)
-> results.py (results.csv, curves.csv, the frames chapters read) -> verify.py.
"""
from ..paths import FRESH_DIR, STUDY_DIR, WEIGHTS_DIR, fresh_runs_dir
from .cache import (
    check_entry,
    committed_entries,
    environment,
    execute,
    is_committed,
    kept_run,
    load_entry,
    load_model,
    load_weights,
    run_path,
    store,
    study_compile,
    study_weights_dir,
    trained_weights,
    weights_path,
    weights_step,
)
from .plan import (
    ALPHABET_VARIANTS,
    EXTRAPOLATE,
    MEASUREMENTS,
    SEEDS,
    STUDY_VERSION,
    THETAS,
    Run,
    added_seed_plan,
    plan,
    unique_runs,
)
from .results import (
    StudySettings,
    chapter_curves,
    chapter_results,
    chapter_text_results,
    curves_frame,
    every_seed,
    frame,
    load_curves,
    load_results,
    load_text_curves,
    load_text_results,
    run_study,
    study_settings,
    summary_path,
    write_summary,
    write_text_summary,
)
from .text_plan import TEXT_MEASUREMENTS, TEXT_SEEDS, TextRun, text_plan

__all__ = ["STUDY_DIR", "WEIGHTS_DIR", "check_entry", "committed_entries", "environment", "execute",
           "load_entry",
           "is_committed", "kept_run", "load_model", "load_weights", "study_compile",
           "study_weights_dir", "trained_weights", "run_path", "StudySettings", "study_settings",
           "every_seed",
           "store", "weights_path", "weights_step", "ALPHABET_VARIANTS",
           "EXTRAPOLATE", "added_seed_plan",
           "MEASUREMENTS", "SEEDS", "STUDY_VERSION", "THETAS", "Run", "plan", "unique_runs",
           "FRESH_DIR", "fresh_runs_dir", "chapter_curves", "chapter_results",
           "chapter_text_results", "curves_frame", "frame",
           "load_curves", "load_results", "load_text_curves", "load_text_results",
           "run_study", "summary_path", "write_summary",
           "write_text_summary", "TEXT_MEASUREMENTS", "TEXT_SEEDS", "TextRun", "text_plan"]
