"""The training chapter's machinery beside the study's plain loop: LLaMA-1's optimizer
settings and learning-rate schedule, and a toy run of a few steps that records the loss
and the learning rate of every step.

The study trains every puzzle run with `train.loop.PlainStep` (AdamW with torch's defaults, a
constant learning rate, no warm-up). LLaMA-1 used AdamW with beta2 0.95 and weight decay
0.1, 2,000 warm-up steps and a cosine schedule down to a tenth of the peak learning rate,
with the gradient norm clipped at 1.0 (Touvron et al. 2023, section 2.3). The schedule is
the package's one (`schedule.warmup_cosine`), which the same step takes as step -> rate.
"""
from __future__ import annotations

from functools import partial

import pandas as pd
import torch

from ...analysis.comparisons import at_settings
from ...train.schedule import warmup_cosine

# Touvron et al. (2023), "LLaMA: Open and efficient foundation language models", section 2.3.
LLAMA1_BETAS = (0.9, 0.95)
LLAMA1_WEIGHT_DECAY = 0.1
LLAMA1_WARMUP_STEPS = 2000
LLAMA1_FINAL_LR_FRACTION = 0.1  # the cosine ends at 10 % of the peak learning rate


def paper_optimizer(params, lr: float) -> torch.optim.AdamW:
    """torch.optim.AdamW with LLaMA-1's betas and weight decay."""
    return torch.optim.AdamW(params, lr=lr, betas=LLAMA1_BETAS, weight_decay=LLAMA1_WEIGHT_DECAY)


def paper_schedule(peak: float, steps: int, warmup: int = LLAMA1_WARMUP_STEPS,
                   final: float = LLAMA1_FINAL_LR_FRACTION):
    """LLaMA-1's schedule as `train.loop.PlainStep` takes it, step -> rate: the package's one
    `schedule.warmup_cosine`, at `peak` over `steps` steps (the paper's warm-up and final
    fraction unless given)."""
    warmup_cosine(1, peak, warmup, steps, final)  # a bad warm-up or length fails here, not mid-run
    return partial(warmup_cosine, peak=peak, warmup=warmup, steps=steps, final=final)


def toy_run(step, batches) -> pd.DataFrame:
    """Call `step` (a `train.loop.PlainStep`) on each batch in turn; the loss and the learning
    rate every step used (a scheduled step sets its rate as it starts), one row per step
    (steps counted from 1)."""
    rows = []
    for i, ids in enumerate(batches, start=1):
        loss = float(step(ids))
        rows.append({"step": i, "lr": step.opt.param_groups[0]["lr"], "loss": loss})
    return pd.DataFrame(rows).set_index("step")


def solved_counts(runs: pd.DataFrame, variant: str = "llama") -> pd.DataFrame:
    """Per task and regime, how many of `variant`'s runs solved by the cap (`solved`) out
    of every run it made (`runs`), at the study's own settings (`comparisons.at_settings`).
    `runs` is one row per run, as `comparisons.runs_table` gives it."""
    own = at_settings(runs[runs.variant == variant])
    return own.groupby(["task", "regime"]).censored.agg(solved=lambda c: int((~c).sum()), runs="size")
