"""The text study's runs: every mechanism on next-character loss, paired by seed.

Arms: every matrix control against `llama`, and the rotation bases 10, 100 and 1,000,000
against 10,000 (`TEXT_ARMS`). Seeds 0–9 at the reference learning rate (`text`), and the
learning-rate check: every arm at half and twice the rate on seeds 0–2 (`text_lr`; the
1× runs are shared with `text`). A `TextRun` is cached like a puzzle run: its key hashes
its record, the corpus's hashes and `TEXT_VERSION`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..config import MATRIX_VARIANTS, VARIANTS, variant_config
from ..corpus import SHA256
from ..text import VOCAB_SIZE
from ..text_train import TextBudget, text_budget_dict
from .plan import check_seeds, record_key

# Bump whenever a change to the model, the corpus reading or the text trainer alters
# any number a text run produces.
TEXT_VERSION = 1
CORPUS_DIGEST = hashlib.sha256(json.dumps(SHA256, sort_keys=True).encode()).hexdigest()[:16]
TEXT_SEEDS = tuple(range(10))
LR_SEEDS = (0, 1, 2)
LR_SCALES = (0.5, 1.0, 2.0)
TEXT_THETAS = (10.0, 100.0, 1_000_000.0)  # each against the reference's 10,000
TEXT_MEASUREMENTS = ("text", "text_lr")
KEPT = {("llama", ()), ("abs_pos", ())}  # weights kept for the chapter (seed 0, 1× rate)


def text_arms() -> list[tuple[str, tuple]]:
    """(variant, overrides) of every text arm, the reference first."""
    return ([("llama", ())] + [(v, ()) for v in MATRIX_VARIANTS if v != "llama"]
            + [("llama", (("rope_theta", th),)) for th in TEXT_THETAS])


@dataclass(frozen=True)
class TextRun:
    """One text training run: variant, seed, Config overrides (the rotation base), the
    learning-rate scale of the check, and the budget. Trained eagerly (`compile` False)."""
    variant: str
    seed: int
    overrides: tuple = ()
    lr_scale: float = 1.0
    budget: TextBudget = field(default_factory=TextBudget)
    task = "text"
    compile = False
    regime = "text"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {sorted(VARIANTS)}")
        check_seeds((self.seed,))
        if self.lr_scale <= 0:
            raise ValueError(f"lr_scale must be positive, got {self.lr_scale!r}")
        if round(self.budget.lr / self.lr_scale, 12) != TextBudget().lr:
            raise ValueError("build a TextRun's budget with TextBudget.for_steps(steps, lr_scale)")

    @property
    def config(self):
        return variant_config(self.variant, vocab_size=VOCAB_SIZE, **dict(self.overrides))

    @property
    def keeps_weights(self) -> bool:
        return (self.variant, self.overrides) in KEPT and self.seed == 0 and self.lr_scale == 1.0

    def record(self) -> dict:
        return {"version": TEXT_VERSION, "task": "text", "variant": self.variant,
                "seed": self.seed, "overrides": [list(o) for o in self.overrides],
                "lr_scale": self.lr_scale, "budget": text_budget_dict(self.budget),
                "corpus": CORPUS_DIGEST}

    @property
    def key(self) -> str:
        return record_key(self.record())

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={v:g}" for k, v in self.overrides)
        rate = f" lr×{self.lr_scale:g}" if self.lr_scale != 1.0 else ""
        return f"{self.variant} text{extra}{rate} seed={self.seed}"


def text_plan(only=TEXT_MEASUREMENTS, seeds=TEXT_SEEDS, steps: int | None = None,
              lr_seeds=LR_SEEDS) -> dict[str, list[TextRun]]:
    """The text measurements: name -> runs (`steps` cuts the budget for a quick look)."""
    bad = [m for m in only if m not in TEXT_MEASUREMENTS]
    if bad:
        raise ValueError(f"unknown text measurement(s) {bad}; choose from {list(TEXT_MEASUREMENTS)}")
    seeds = check_seeds(seeds)
    out: dict[str, list[TextRun]] = {}
    if "text" in only:
        budget = TextBudget.for_steps(steps)
        out["text"] = [TextRun(v, s, o, 1.0, budget) for v, o in text_arms() for s in seeds]
    if "text_lr" in only:
        out["text_lr"] = [TextRun(v, s, o, k, TextBudget.for_steps(steps, k))
                          for v, o in text_arms() for k in LR_SCALES for s in check_seeds(lr_seeds)]
    return out


def text_added_plan(arms, seeds, steps: int | None = None) -> dict[str, list[TextRun]]:
    """The added `seeds` (the design's 10–39) of the text arms in `arms` ((variant,
    overrides) pairs, as `text_comparisons.text_added_arms` lists the arms of the
    comparisons the stage-1 rule sends on), arm by arm, so comparisons complete one after
    another."""
    budget = TextBudget.for_steps(steps)
    return {"text": [TextRun(v, s, tuple(o), 1.0, budget) for v, o in arms for s in check_seeds(seeds)]}
