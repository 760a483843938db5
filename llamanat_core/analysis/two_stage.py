"""The study's whole plan under the two-stage design: the first ten seeds of every row, plus
the seeds stage one's rule adds to the rows it leaves undecided. It reads the comparisons,
so it sits above the study, which only runs and stores what it is given."""
from __future__ import annotations

from pathlib import Path

from ..paths import STUDY_DIR
from ..study.committed import study_weights_dir
from ..study.plan import MEASUREMENTS, added_seed_plan, merge_plans, plan, unique_runs
from ..study.results import frame
from ..study.run import SEEDS, Run
from ..study.run_files import load_entry, run_path
from ..study.text_plan import LR_SEEDS, TEXT_MEASUREMENTS, TEXT_SEEDS, text_added_plan, text_plan
from ..train.loop import Budget
from .comparisons import added_seed_arms, decide
from .decision_cache import decided
from .sequential import ADDED_SEEDS
from .text_comparisons import decide_text, text_added_arms


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
    arms = added_seed_arms(decided(frame(first, entries), decide, "decide() of the first stage"))
    added = added_seed_plan(arms, ADDED_SEEDS, budget, compile)
    if not train_added:
        added = {m: [r for r in rs if run_path(cache_dir, r).exists()] for m, rs in added.items()}
    return merge_plans(first, added)


def text_study_plan(cache_dir: Path = STUDY_DIR, only=TEXT_MEASUREMENTS, seeds=TEXT_SEEDS,
                    steps: int | None = None, lr_seeds=LR_SEEDS,
                    train_added: bool = False) -> dict[str, list[Run]]:
    """The text study under the same two stages: `text_plan`, plus seeds 10–39 of the
    arms the stage-1 rule leaves undecided, read from the first ten seeds once all are
    cached. As in `study_plan`, added runs count only once cached unless `train_added`, so
    a plain `llamanat study` keeps them in the summary without starting them."""
    first = text_plan(only, seeds, steps, lr_seeds)
    if "text" not in only or tuple(seeds) != TEXT_SEEDS:
        return first
    weights = study_weights_dir(cache_dir)
    entries = {r.key: e for r in first["text"] if (e := load_entry(cache_dir, r, weights)) is not None}
    if len(entries) < len(first["text"]):
        return first  # the rule reads a complete first stage
    arms = text_added_arms(decide_text(frame(first["text"], entries)))
    added = text_added_plan(arms, ADDED_SEEDS, steps)
    if not train_added:
        added = {m: [r for r in rs if run_path(cache_dir, r).exists()] for m, rs in added.items()}
    return merge_plans(first, added)
