"""The study: the runs (one record type, `Run`, for every task), the measurement plans,
the resumable run cache, the executors that train runs, the results as pandas, and the
early-trajectory check of committed runs. The study layer may import the core, the model,
data and training layers; never the analysis, the book or the command line.

run.py (one run's record and key) -> plan.py, text_plan.py (which runs) -> executors.py
(where they train) -> training.py (how one trains) -> run_files.py (one file per run),
weights.py (kept weights) -> results.py (results.csv, curves.csv, the frames chapters
read) -> verify.py.
"""
from ..paths import FRESH_DIR, STUDY_DIR, WEIGHTS_DIR, fresh_runs_dir
from .committed import is_committed, study_compile, study_weights_dir
from .environment import environment
from .plan import ALPHABET_VARIANTS, MEASUREMENTS, THETAS, added_seed_plan, plan, unique_runs
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
    load_tuned_curves,
    load_tuned_results,
    run_study,
    study_settings,
    summary_path,
    write_summary,
    write_text_summary,
)
from .run import EXTRAPOLATE, SEEDS, STUDY_VERSION, TASKS, Run
from .run_files import check_entry, committed_entries, load_entry, run_path, store
from .text_plan import TEXT_MEASUREMENTS, TEXT_SEEDS, text_plan
from .training import train_run
from .weights import kept_run, load_model, load_weights, trained_weights, weights_path, weights_step

__all__ = ["STUDY_DIR", "WEIGHTS_DIR", "check_entry", "committed_entries", "environment", "train_run",
           "load_entry", "is_committed", "kept_run", "load_model", "load_weights", "study_compile",
           "study_weights_dir", "trained_weights", "run_path", "StudySettings", "study_settings",
           "every_seed", "store", "weights_path", "weights_step", "ALPHABET_VARIANTS",
           "EXTRAPOLATE", "added_seed_plan", "TASKS",
           "MEASUREMENTS", "SEEDS", "STUDY_VERSION", "THETAS", "Run", "plan", "unique_runs",
           "FRESH_DIR", "fresh_runs_dir", "chapter_curves", "chapter_results",
           "chapter_text_results", "curves_frame", "frame",
           "load_curves", "load_results", "load_text_curves", "load_text_results",
           "load_tuned_curves", "load_tuned_results", "run_study", "summary_path", "write_summary",
           "write_text_summary", "TEXT_MEASUREMENTS", "TEXT_SEEDS", "text_plan"]
