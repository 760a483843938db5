"""The text study's runs: every mechanism on next-character loss, paired by seed.

Arms: every matrix control against `llama`, and the rotation bases 10, 100 and 1,000,000
against 10,000 (`TEXT_ARMS`). Seeds 0–9 at the reference learning rate (`text`), and the
learning-rate check: every arm at half and twice the rate on seeds 0–2 (`text_lr`; the
1× runs are shared with `text`). A text run is a `run.Run` of task `text`, cached like a
puzzle run: its key hashes its record, the corpus's hashes and `TEXT_VERSION`. Which
runs keep their weights is the plan's `keep` (by default `run.TEXT_KEPT`'s arms at seed 0);
the model sizes (`config.SIZES`), weight decay's reach and the compiled step are its
`sizes` and the runs' fields.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..model.config import MATRIX_VARIANTS
from ..train.text import TextBudget
from .run import Run, check_seeds

TEXT_SEEDS = tuple(range(10))
LR_SEEDS = (0, 1, 2)
LR_SCALES = (0.5, 1.0, 2.0)
TEXT_THETAS = (10.0, 100.0, 1_000_000.0)  # each against the reference's 10,000
TEXT_MEASUREMENTS = ("text", "text_lr")


def text_arms() -> list[tuple[str, tuple]]:
    """(variant, overrides) of every text arm, the reference first."""
    return ([("llama", ())] + [(v, ()) for v in MATRIX_VARIANTS if v != "llama"]
            + [("llama", (("rope_theta", th),)) for th in TEXT_THETAS])


def keep_seeds(seeds) -> Callable[[Run], bool]:
    """A `keep` rule: the weights of every arm's `seeds` at the reference rate, at every size."""
    seeds = frozenset(check_seeds(seeds))
    return lambda run: run.seed in seeds and run.lr_scale == 1.0


def text_run(variant: str, seed: int, overrides=(), lr_scale: float = 1.0, steps: int | None = None,
             keep: Callable[[Run], bool] | None = None, decay: str = "all", **fields) -> Run:
    """One text run at the budget cut to `steps` (None: the full one), the rate scale and
    what weight decay touches (`TextBudget.decay`); `fields` are the run's others (`size`,
    `compile`). `keep` decides whether its weights are kept (None: `Run.keeps_weights`)."""
    budget = replace(TextBudget.for_steps(steps, lr_scale), decay=decay)
    run = Run("text", variant, seed, tuple(overrides), budget=budget, lr_scale=lr_scale, **fields)
    return run if keep is None else replace(run, keep_weights=bool(keep(run)))


def text_plan(only=TEXT_MEASUREMENTS, seeds=TEXT_SEEDS, steps: int | None = None, lr_seeds=LR_SEEDS,
              keep: Callable[[Run], bool] | None = None, sizes=("S",), **fields) -> dict[str, list[Run]]:
    """The text measurements: name -> runs, every arm at each of `sizes` (`steps` cuts the
    budget for a quick look; `keep` picks the runs whose weights are kept, e.g.
    `keep_seeds((0, 1, 2))`; `fields`, e.g. `decay` or `compile`, go to every run)."""
    bad = [m for m in only if m not in TEXT_MEASUREMENTS]
    if bad:
        raise ValueError(f"unknown text measurement(s) {bad}; choose from {list(TEXT_MEASUREMENTS)}")
    seeds = check_seeds(seeds)
    out: dict[str, list[Run]] = {}
    if "text" in only:
        out["text"] = [text_run(v, s, o, 1.0, steps, keep, size=z, **fields)
                       for z in sizes for v, o in text_arms() for s in seeds]
    if "text_lr" in only:
        out["text_lr"] = [text_run(v, s, o, k, steps, keep, size=z, **fields) for z in sizes
                          for v, o in text_arms() for k in LR_SCALES for s in check_seeds(lr_seeds)]
    return out


def text_added_plan(arms, seeds, steps: int | None = None,
                    keep: Callable[[Run], bool] | None = None, **fields) -> dict[str, list[Run]]:
    """The added `seeds` (the design's 10–39) of the text arms in `arms` ((variant,
    overrides) pairs, as `text_comparisons.text_added_arms` lists the arms of the
    comparisons the stage-1 rule sends on), arm by arm, so comparisons complete one after
    another; `fields` as `text_plan`'s."""
    seeds = check_seeds(seeds)
    return {"text": [text_run(v, s, o, 1.0, steps, keep, **fields) for v, o in arms for s in seeds]}
