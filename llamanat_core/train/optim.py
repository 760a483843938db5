"""The optimizer every run uses: AdamW with torch's default hyper-parameters.

The plain loop builds it with `adamw`; the speed path (`compiled.adamw_`) writes the same
update out on flat tensors and reads the same constants, so the two cannot drift apart.
The learning rate and the clipping norm are the budget's (`loop.Budget.lr`, `.clip`).

Which parameters decay (`DECAY`): the puzzles and the first text study decay "all" of
them; the text recipe decays the weight "matrices" only, as nanoGPT and the usual LLaMA
recipe do. Weight decay pulls a weight towards zero; for a matrix that is a preference
for small weights, but a norm's gain of zero switches its channel off and a bias of zero
is no simpler than any other, so gains and biases are left alone. The embedding is a
matrix (and, tied, the output head's) and decays like the others.
"""
from __future__ import annotations

import torch

BETAS = (0.9, 0.999)  # torch.optim.AdamW's defaults
EPS = 1e-8
WEIGHT_DECAY = 1e-2  # decoupled: every step multiplies each weight by (1 - lr * WEIGHT_DECAY)


DECAY = ("all", "matrices")


def decays(param: torch.Tensor, decay: str = "all") -> bool:
    """Whether weight decay touches `param`: every parameter, or the matrices only."""
    if decay not in DECAY:
        raise ValueError(f"decay must be one of {DECAY}, got {decay!r}")
    return decay == "all" or param.dim() >= 2


def adamw(params, lr: float, decay: str = "all") -> torch.optim.AdamW:
    """torch.optim.AdamW at `lr` with the constants above (torch's defaults), weight decay
    on the parameters `decays` picks (one group each way; "all" keeps one group)."""
    params = list(params)
    groups = params if decay == "all" else [
        {"params": [p for p in params if decays(p, decay)], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in params if not decays(p, decay)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
