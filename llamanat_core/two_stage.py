"""The study's whole plan under the two-stage design: the first ten seeds of every row, plus
the seeds stage one's rule adds to the rows it leaves undecided. It reads the comparisons,
so it sits above the study, which only runs and stores what it is given."""
from __future__ import annotations

from pathlib import Path

from .comparisons import added_seed_arms, decide
from .paths import STUDY_DIR
from .sequential import ADDED_SEEDS
from .study.cache import load_entry, run_path, study_weights_dir
from .study.plan import MEASUREMENTS, SEEDS, Run, added_seed_plan, merge_plans, plan, unique_runs
from .study.results import frame
from .train import Budget


def study_plan(cache_dir: Path = STUDY_DIR, budget: Budget = Budget(), compile: bool = True,
               train_added: bool = False) -> dict[str, list[Run]]:
    """The whole study: the first ten seeds of every row, plus the seeds the stage-1 rule
    adds to the rows it leaves undecided (`comparisons.added_seed_arms`, decided on the
    first ten seeds alone). Added runs count only once cached, unless `train_added`: a
    plain `llamanat study` (and `make book`) never starts hours of added runs."""
    first = plan(MEASUREMENTS, SEEDS, budget, compile)
    runs = unique_runs(first)
    weights = study_weights_dir(cache_dir)
    entries = {r.key: e for r in runs if (e := load_entry(cache_dir, r, weights)) is not None}
    if len(entries) < len(runs):
        return first  # the rule reads a complete first stage
    arms = added_seed_arms(decide(frame(first, entries)))
    added = added_seed_plan(arms, ADDED_SEEDS, budget, compile)
    if not train_added:
        added = {m: [r for r in rs if run_path(cache_dir, r).exists()] for m, rs in added.items()}
    return merge_plans(first, added)
