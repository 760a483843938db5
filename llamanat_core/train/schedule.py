"""The one learning-rate schedule: a linear warm-up, then a half cosine down to a fraction
of the peak. A pure function of the step, so a training step can call it (`loop.PlainStep`
takes any step -> rate function) and a chapter can print it without an optimizer.

The text study's budget (`train.text.TextBudget.lr_at`) and the training chapter's sketch
of LLaMA-1's schedule (2,000 warm-up steps, a cosine to a tenth of the peak) both read it.
"""
from __future__ import annotations

import math


def warmup_cosine(step: int, peak: float, warmup: int, steps: int, final: float) -> float:
    """The rate of step 1..steps: `peak * step / warmup` up to step `warmup` (so the peak
    is reached at step `warmup`), then a cosine from the peak to `final * peak` at step
    `steps`. `warmup` 0 starts on the cosine."""
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup must lie in 0..steps-1 (steps={steps}), got {warmup!r}")
    if not 1 <= step <= steps:
        raise ValueError(f"step must lie in 1..steps={steps}, got {step!r}")
    if step <= warmup:
        return peak * step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress)))
