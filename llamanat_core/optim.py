"""The optimizer every run uses: AdamW with torch's default hyper-parameters.

The plain loop builds it with `adamw`; the speed path (`fast.adamw_`) writes the same
update out on flat tensors and reads the same constants, so the two cannot drift apart.
The learning rate and the clipping norm are the budget's (`train.Budget.lr`, `.clip`).
"""
from __future__ import annotations

import torch

BETAS = (0.9, 0.999)  # torch.optim.AdamW's defaults
EPS = 1e-8
WEIGHT_DECAY = 1e-2  # decoupled: every step multiplies each weight by (1 - lr * WEIGHT_DECAY)


def adamw(params, lr: float) -> torch.optim.AdamW:
    """torch.optim.AdamW at `lr` with the constants above (torch's defaults)."""
    return torch.optim.AdamW(params, lr=lr, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
