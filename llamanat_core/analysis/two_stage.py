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
from ..study.text_recipe import Stored, arm_label, tuned_plan
from ..train.loop import Budget
from .comparisons import added_seed_arms, decide
from .decision_cache import decided
from .sequential import ADDED_SEEDS
from .text_comparisons import REFERENCE_THETA, decide_text, text_added_arms
from .text_design import added_arms, decide_tuned


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


def tuned_added_seeds(p: dict[str, list[Run]], stored: Stored) -> dict[str, dict[str, tuple[int, ...]]]:
    """The seeds the tuned study's registered rule adds (size -> {arm label: seeds}), read
    from the stored runs of plan `p`: both arms of every primary comparison whose stage one
    neither decided nor found equivalent, the reference at its best rate and the arm at its
    own (`text_design.added_arms`). A row is read once its own stage-one seeds are in."""
    runs = [r for r in unique_runs(p) if stored(r) is not None]
    if not runs:
        return {}
    df = frame(runs, {r.key: stored(r) for r in runs})
    if "size" not in df:  # the frame leaves it out while every run is S
        df = df.assign(size="S")
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for a in added_arms(decide_tuned(df)).itertuples():
        overrides = () if a.rope_theta == REFERENCE_THETA else (("rope_theta", a.rope_theta),)
        out.setdefault(a.size, {})[arm_label(a.variant, overrides)] = tuple(a.seeds)
    return out


def tuned_study_plan(stored: Stored, steps: int | None = None, compile: bool = True) -> dict[str, list[Run]]:
    """The tuned study's whole plan so far: `text_recipe.tuned_plan`, plus the seeds its
    registered rule adds (`tuned_added_seeds`). One pass suffices: added seeds change
    neither a rate chosen on seeds 0-2 nor a stage-one verdict."""
    first = tuned_plan(stored, steps, compile=compile)
    added = tuned_added_seeds(first, stored)
    return tuned_plan(stored, steps, added_seeds=added, compile=compile) if added else first
