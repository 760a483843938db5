"""The tuned text study: its recipe, fixed before its first run, and its plan.

**The recipe** (`recipe_budget`). Every run: `RECIPE_STEPS` steps of 64 windows of 48
characters, a linear warm-up over the first `WARMUP_SHARE` of them, then a cosine to a
tenth of the peak rate; AdamW with torch's default constants, weight decay on the weight
matrices only (`optim.decays`); clipping at 1; the compiled step. The budget was chosen by
the pilot `benchmarks/text_recipe.py` (one pilot seed, never a study seed, validation
half only; its record is `artifacts/study/text_recipe_pilot.json`): the smallest budget
of those it tried at which the reference, at its best rate, beats the counted 4-gram on
the validation half and gains less than 2 % over its last quarter. Both sizes get the same
tokens (a fixed-data ladder), so M sees four times fewer tokens per parameter than S.

**The rates.** A factor-2 grid of peak rates, `lr_scale` × 1e-3 with `lr_scale` a power of
two. Each arm at each size starts at `START_SCALES` around a centre (at S the pilot's best
rate for the reference, for every arm; at M the arm's own best rate at S) on seeds 0–2,
and the grid grows one factor of two at a time on the side where the best lies until the
best is interior: a worse rate on both sides (`next_scales`). "Best" is the lowest mean
loss over seeds 0–2 on the whole validation half at the end (`loss_val`); the test half
never chooses anything.

**The runs** (`tuned_plan`), stage by stage, each read from what is already stored:
1. the brackets at S, every arm;
2. at S, every arm at its own best rate and at the reference's (the common rate) on seeds
   0–9 (seeds 0–2 of a rate in the bracket are shared);
3. the brackets at M, an arm's as soon as its S bracket is settled;
4. at M, every arm at its own best rate and at the reference's on seeds 0–4;
5. the seeds the registered rule (`text_design`) adds to the comparisons it leaves open.
The analysis of these runs is `text_design.decide_tuned`, registered before they ran.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..model.config import MATRIX_VARIANTS, SIZES, TEXT_CONTROLS
from ..paths import STUDY_DIR
from ..train.text import TextBudget
from .committed import study_weights_dir
from .plan import interleave_graphs, unique_runs
from .results import TUNED_CURVES, TUNED_RESULTS, run_study, write_text_summary
from .run import Run
from .run_files import load_entry
from .weights import weights_path

RECIPE_STEPS = 2400  # from the pilot (see the module's docstring)
WARMUP_SHARE = 0.05  # the first text study's 40 of 800 steps
PILOT_BEST_SCALE = 8.0  # the pilot's best rate for the reference, where the S brackets start
START_SCALES = (0.5, 1.0, 2.0)  # relative to the centre: one factor of two either side
LR_SEEDS = (0, 1, 2)
FIRST_SEEDS = {"S": tuple(range(10)), "M": tuple(range(5))}
# The common rate (each arm at the reference's best) on the stage-one seeds, as the
# registered analysis (`text_design`) reads it: fixed before the runs, not cut after.
COMMON_SEEDS = dict(FIRST_SEEDS)
THETAS = (10.0, 100.0, 1_000_000.0)  # rotation bases, each against the reference's 10,000
KEPT_SEEDS = (0, 1, 2)  # trained weights kept for the book's looks inside, at the best rate
EVAL_EVERY = 100  # the validation curve: 24 points over the budget


def recipe_budget(lr_scale: float = 1.0, steps: int | None = None) -> TextBudget:
    """The recipe at peak rate `lr_scale` × 1e-3; `steps` cuts it for a quick look (the
    warm-up and evaluations scaled alike, endpoints on the first test windows)."""
    cut = TextBudget.for_steps(steps, lr_scale) if steps is not None else None
    full = replace(TextBudget(), steps=RECIPE_STEPS, warmup=round(WARMUP_SHARE * RECIPE_STEPS),
                   lr=TextBudget().lr * lr_scale, decay="matrices", eval_every=EVAL_EVERY)
    if cut is None or steps == RECIPE_STEPS:
        return full
    return replace(cut, warmup=max(1, round(WARMUP_SHARE * steps)) if steps > 2 else 0, decay="matrices")


def tuned_arms() -> list[tuple[str, tuple]]:
    """(variant, overrides) of every arm of the tuned study, the reference first: the
    matrix controls, the text-only controls, the rotation bases."""
    return ([("llama", ())] + [(v, ()) for v in MATRIX_VARIANTS if v != "llama"]
            + [(v, ()) for v in TEXT_CONTROLS]
            + [("llama", (("rope_theta", th),)) for th in THETAS])


def next_scales(val: dict[float, float]) -> list[float]:
    """The rates still to try, given the mean validation loss at each rate tried so far:
    nothing once the best is interior, else one factor of two past the edge it sits on."""
    if not val:
        raise ValueError("next_scales needs the validation loss of at least one rate")
    scales = sorted(val)
    best = min(scales, key=lambda s: (val[s], s))
    if best == scales[0]:
        return [best / 2]
    if best == scales[-1]:
        return [best * 2]
    return []


def best_scale(val: dict[float, float]) -> float | None:
    """The best rate once it is interior, else None."""
    if not val or next_scales(val):
        return None
    return min(val, key=lambda s: (val[s], s))


def start_scales(centre: float) -> tuple[float, ...]:
    if not (centre > 0 and math.log2(centre).is_integer()):
        raise ValueError(f"a bracket's centre must be a power of two, got {centre!r}")
    return tuple(centre * k for k in START_SCALES)


def run_seconds(step_ms: float, eval_s: float, steps: int = RECIPE_STEPS) -> float:
    """A run's seconds: its steps at `step_ms`, plus its evaluations (`eval_s`: the
    validation curve, the held-out halves at three lengths), measured apart."""
    return steps * step_ms / 1e3 + eval_s


def plan_estimate(step_ms: dict[str, float], eval_s: dict[str, float], extensions: float = 0.5) -> dict:
    """The plan's size and cost before it runs: runs per size and stage at these step
    times (ms) and evaluation times (s), per size. Each bracket is assumed to need
    `extensions` extra rates on average (it starts with three). The seeds the registered
    rule adds are not counted: the data decide them."""
    arms = len(tuned_arms())
    rates = len(START_SCALES) + extensions
    rows = []
    for size in SIZES:
        n_first = len(FIRST_SEEDS[size])
        secs = run_seconds(step_ms[size], eval_s[size])
        rows.append({"stage": "bracket (seeds 0-2, every rate)", "size": size,
                     "runs": round(arms * rates * len(LR_SEEDS)), "seconds": secs})
        rows.append({"stage": f"own best rate, seeds 3-{n_first - 1}", "size": size,
                     "runs": arms * (n_first - len(LR_SEEDS)), "seconds": secs})
        # the common rate: new runs only for an arm whose best differs from the
        # reference's (assumed: half of them), its seeds 0-2 there shared with its bracket
        n_common = len(COMMON_SEEDS[size])
        if n_common > len(LR_SEEDS):
            rows.append({"stage": f"common rate, seeds 3-{n_common - 1} (half the arms)", "size": size,
                         "runs": (arms - 1) // 2 * (n_common - len(LR_SEEDS)), "seconds": secs})
    cpu = sum(r["runs"] * r["seconds"] for r in rows) / 3600
    return {"rows": rows, "cpu_hours": cpu, "wall_hours": cpu / 2}


Stored = Callable[[Run], "dict | None"]
Planner = Callable[..., "dict[str, list[Run]]"]
"""(stored, steps, compile) -> the plan: `tuned_plan`, or the analysis layer's
`two_stage.tuned_study_plan`, which adds the seeds the registered rule asks for."""


def tuned_run(variant: str, overrides: tuple, size: str, scale: float, seed: int,
              steps: int | None = None, keep: bool = False, compile: bool = True) -> Run:
    """One run of the tuned study: the recipe at `scale`, compiled (a reader's quick look
    may train eagerly: another key, since the two round differently)."""
    return Run("text", variant, seed, overrides, budget=recipe_budget(scale, steps), compile=compile,
               lr_scale=scale, size=size, keep_weights=keep)


def arm_label(variant: str, overrides: tuple) -> str:
    return variant if not overrides else f"base {dict(overrides)['rope_theta']:,.0f}"


class _Bracket:
    """One arm's rate bracket at one size, read from the stored runs: its runs so far
    (the rates it has reached, seeds 0-2), and its best rate once that is interior."""

    def __init__(self, arm: tuple, size: str, centre: float, stored: Stored, steps: int | None,
                 compile: bool = True):
        self.arm, self.size, self.steps, self.stored, self.compile = arm, size, steps, stored, compile
        self.scales, self.best = list(start_scales(centre)), None
        while True:
            val, missing = self._validation()
            if missing:
                return
            more = next_scales(val)
            if not more:
                self.best = best_scale(val)
                return
            self.scales += more

    @property
    def runs(self) -> list[Run]:
        """Every run of the bracket so far, stored or not."""
        return [self.run(scale, s) for scale in self.scales for s in LR_SEEDS]

    def run(self, scale: float, seed: int) -> Run:
        keep = seed in KEPT_SEEDS and (self.best is None or scale == self.best)
        return tuned_run(*self.arm, self.size, scale, seed, self.steps, keep, self.compile)

    def _validation(self) -> tuple[dict[float, float], list[Run]]:
        val, missing = {}, []
        for scale in self.scales:
            entries = [(r, self.stored(r)) for r in (self.run(scale, s) for s in LR_SEEDS)]
            missing += [r for r, e in entries if e is None]
            if all(e is not None for _, e in entries):
                val[scale] = sum(e["endpoints"]["loss_val"] for _, e in entries) / len(entries)
        return val, missing


REFERENCE_ARM = ("llama", ())


def tuned_plan(stored: Stored, steps: int | None = None, added_seeds: dict | None = None,
               compile: bool = True) -> dict[str, list[Run]]:
    """Every run of the tuned study that what is stored now calls for (see the module's
    docstring): the brackets, then each arm at its own best rate and at the reference's on
    the first seeds, at S, then at M (an arm's M bracket opens when its S bracket settles).
    Call it again as runs land. `added_seeds` (size -> {arm label: seeds}) adds the
    registered rule's seeds at the arms' best rates; `steps` cuts every run for a quick look,
    `compile` False trains it eagerly."""
    out: dict[str, list[Run]] = {"tuned_bracket": [], "tuned": [], "tuned_common": []}
    cut = (steps, compile)
    best = _size_stage(out, "S", {arm: PILOT_BEST_SCALE for arm in tuned_arms()}, stored, cut,
                       (added_seeds or {}).get("S", {}))
    _size_stage(out, "M", {arm: b for arm, b in best.items() if b is not None}, stored, cut,
                (added_seeds or {}).get("M", {}))
    return out


def _size_stage(out: dict, size: str, centres: dict, stored: Stored, cut: tuple,
                added: dict) -> dict[tuple, float | None]:
    """One size's runs into `out`; each arm's best rate (None while its bracket is open)."""
    brackets = {arm: _Bracket(arm, size, c, stored, *cut) for arm, c in centres.items()}
    ref = brackets.get(REFERENCE_ARM)
    for arm, b in brackets.items():
        out["tuned_bracket"] += b.runs
        if b.best is not None:
            seeds = FIRST_SEEDS[size] + tuple(added.get(arm_label(*arm), ()))
            out["tuned"] += [b.run(b.best, s) for s in seeds]
        if ref is not None and ref.best is not None and arm != REFERENCE_ARM:
            out["tuned_common"] += [b.run(ref.best, s) for s in COMMON_SEEDS[size]]
    return {arm: b.best for arm, b in brackets.items()}


def stored_in(cache_dir: Path) -> Stored:
    """A run's stored entry in a cache, or None; entries found are remembered (a stored
    run never changes), misses are looked up again. The plan reads run files alone: while
    a bracket is open every seed 0-2 saves its weights, but only the best rate's are kept
    in the end, so a settled bracket's other runs need none (the runner trains again only
    a best-rate run whose kept weights are missing: `weights_owed`)."""
    found: dict[str, dict] = {}

    def stored(run: Run) -> dict | None:
        if run.key not in found and (e := load_entry(cache_dir, run, weights_dir=None)) is not None:
            found[run.key] = e
        return found.get(run.key)
    return stored


def _weights_missing(run: Run, weights_dir: Path) -> bool:
    return run.keeps_weights and not weights_path(run, weights_dir).exists()


def weights_owed(plan: dict[str, list[Run]], weights_dir: Path) -> list[Run]:
    """The runs whose weights the book needs and the folder lacks: seeds 0-2 at a settled
    bracket's best rate. An open bracket's runs save weights too (any rate may turn out
    best) but owe none, so weights lost with an interrupted session cost only the best
    rate's three runs per arm, trained again, never the whole bracket."""
    return [r for r in plan["tuned"] if _weights_missing(r, weights_dir)]


def training_order(plan: dict[str, list[Run]], stored: Stored) -> list[Run]:
    """The plan's runs not stored yet, the most wanted first: the smaller size's primary
    comparisons complete before the larger one's begin (S's answer first; an M run costs
    about four S runs), and within a size the settled arms' stage-one seeds at their own
    rates (each comparison's first look), then the brackets still open (each gates the
    stages after it), then the seeds the rule adds (they gate nothing); the runs at the
    reference's rate (the secondary comparison) come last, S before M. Each tier is spread
    over its compiled graphs (`interleave_graphs`); the order changes no number."""
    tiers = []
    for size in SIZES:
        own = [r for r in plan["tuned"] if r.size == size]
        tiers += [[r for r in own if r.seed in FIRST_SEEDS[size]],
                  [r for r in plan["tuned_bracket"] if r.size == size],
                  [r for r in own if r.seed not in FIRST_SEEDS[size]]]
    tiers += [[r for r in plan["tuned_common"] if r.size == size] for size in SIZES]
    seen: set[str] = set()
    out: list[Run] = []
    for tier in tiers:
        todo = [r for r in unique_runs({"tier": tier}) if r.key not in seen and stored(r) is None]
        seen.update(r.key for r in todo)
        out += interleave_graphs(todo)
    return out


def time_left(plan: dict[str, list[Run]], stored: Stored, workers: int = 2) -> dict[str, dict]:
    """Per size, the plan's runs not stored yet, the median seconds of its stored runs (as
    each run file records them: under the load they ran with), and the wall hours those
    runs take at `workers` at that median (None while no run of the size is stored). Only
    what the plan holds now: brackets still growing and seeds the rule has yet to add
    come on top, so it is a lower bound."""
    out = {}
    for size in SIZES:
        runs = [r for r in unique_runs(plan) if r.size == size]
        seconds = sorted(e["seconds"] for r in runs if (e := stored(r)) is not None)
        left = sum(stored(r) is None for r in runs)
        median = seconds[len(seconds) // 2] if seconds else None
        out[size] = {"left": left, "median_seconds": median,
                     "hours": None if median is None else left * median / workers / 3600}
    return out


def run_tuned(cache_dir: Path = STUDY_DIR, workers: int = 1, steps: int | None = None,
              weights_dir: Path | None = None, progress: bool = True, compile: bool = True,
              planner: Planner | None = None, **executor_options) -> dict[str, list[Run]]:
    """Train the tuned study stage by stage until what is stored asks for nothing more,
    then write its summary (tuned_results.csv, tuned_curves.csv). `planner` turns what is
    stored into the plan (default `tuned_plan`: no added seeds; the command passes the
    one that reads the registered rule). Stopped, it keeps every stored run, and the same
    call resumes."""
    weights_dir = weights_dir or study_weights_dir(cache_dir)
    stored = stored_in(Path(cache_dir))
    while True:
        p = write_tuned_summary(cache_dir, steps, compile, stored, planner)
        # owed weights first: the book reads them, and a session that ends mid-stage then
        # loses only runs whose weights nothing needs yet
        todo = weights_owed(p, weights_dir) or training_order(p, stored)
        if not todo:
            return p
        run_study(unique_runs({"todo": todo}), cache_dir, workers, weights_dir=weights_dir, progress=progress,
                  interleave=False, **executor_options)


def write_tuned_summary(cache_dir: Path = STUDY_DIR, steps: int | None = None, compile: bool = True,
                        stored: Stored | None = None, planner: Planner | None = None) -> dict[str, list[Run]]:
    """Write the summary (tuned_results.csv, tuned_curves.csv) of every run stored so far
    of the plan the stored runs call for, and return that plan: the runner writes it after
    each stage, so the book can read a study still in progress."""
    stored = stored or stored_in(Path(cache_dir))
    p = (planner or tuned_plan)(stored, steps, compile=compile)
    entries = {r.key: e for r in unique_runs(p) if (e := stored(r)) is not None}
    write_text_summary(p, entries, cache_dir, (TUNED_RESULTS, TUNED_CURVES))
    return p
