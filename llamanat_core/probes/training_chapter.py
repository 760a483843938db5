"""The training chapter's machinery beside the study's plain loop: LLaMA-1's optimizer
settings and learning-rate schedule, and a toy run of a few steps that records the loss
and the learning rate of every step.

The study trains every run with `train.PlainStep` (AdamW with torch's defaults, a constant
learning rate, no warm-up). LLaMA-1 used AdamW with beta2 0.95 and weight decay 0.1, 2,000
warm-up steps and a cosine schedule down to a tenth of the peak learning rate, with the
gradient norm clipped at 1.0 (Touvron et al. 2023, section 2.3).
"""
from __future__ import annotations

import pandas as pd
import torch

# Touvron et al. (2023), "LLaMA: Open and efficient foundation language models", section 2.3.
LLAMA1_BETAS = (0.9, 0.95)
LLAMA1_WEIGHT_DECAY = 0.1
LLAMA1_WARMUP_STEPS = 2000
LLAMA1_FINAL_LR_FRACTION = 0.1  # the cosine ends at 10 % of the peak learning rate


def paper_optimizer(params, lr: float) -> torch.optim.AdamW:
    """torch.optim.AdamW with LLaMA-1's betas and weight decay."""
    return torch.optim.AdamW(params, lr=lr, betas=LLAMA1_BETAS, weight_decay=LLAMA1_WEIGHT_DECAY)


def warmup_cosine(opt: torch.optim.Optimizer, warmup: int, total: int,
                  final_fraction: float = LLAMA1_FINAL_LR_FRACTION) -> torch.optim.lr_scheduler.LRScheduler:
    """torch's own schedulers chained: a linear warm-up from peak/warmup to the peak over
    `warmup` steps, then a cosine down to `final_fraction` of the peak at step `total`."""
    sched = torch.optim.lr_scheduler
    peak = opt.param_groups[0]["lr"]
    rise = sched.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup)
    fall = sched.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=final_fraction * peak)
    return sched.SequentialLR(opt, [rise, fall], milestones=[warmup])


def toy_run(step, batches, scheduler=None) -> pd.DataFrame:
    """Call `step` (a `train.PlainStep`) on each batch in turn; the loss and the learning
    rate every step used, one row per step (steps counted from 1)."""
    rows = []
    for i, ids in enumerate(batches, start=1):
        lr = step.opt.param_groups[0]["lr"]
        rows.append({"step": i, "lr": lr, "loss": float(step(ids))})
        if scheduler is not None:
            scheduler.step()
    return pd.DataFrame(rows).set_index("step")
