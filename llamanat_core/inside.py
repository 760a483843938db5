"""Looking inside the tuned text study's models: where in a window the loss falls, and what
each arm writes from the same prompt.

`loss_by_position` scores every position of held-out windows apart, so a rotation base
that reads the far context badly shows as a curve that stops falling early. `arm_samples`
puts several arms' continuations of one prompt side by side, greedy and sampled, through
the package's sampling code (`sampling.sample_text`), with one sampling seed for every arm
so their texts differ by the model alone.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .model import TinyLlama
from .sampling import sample_text
from .text import decode, encode


@torch.no_grad()
def loss_by_position(model: TinyLlama, windows: torch.Tensor, batch: int = 256) -> np.ndarray:
    """Mean next-character loss (nats) at each position 0..T-1 over `windows` (N, T + 1):
    position t predicts character t + 1 from characters 0..t. Position 0 is scored without
    context: it reads only its own character, so its loss is a bigram model's at best;
    every later position reads one character more than the one before."""
    if windows.dim() != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows must be (N, T + 1) with T >= 1, got shape {tuple(windows.shape)}")
    was_training = model.training
    model.eval()
    total = torch.zeros(windows.shape[1] - 1, dtype=torch.float64)
    for chunk in windows.split(batch):
        logits = model(chunk[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")  # (B, T)
        total += loss.double().sum(0)
    model.train(was_training)
    return (total / len(windows)).numpy()


def _check_samples(models: dict, prompt: str, n_chars: int) -> None:
    if not models:
        raise ValueError("models must name at least one arm")
    if not isinstance(n_chars, int) or n_chars < 1:
        raise ValueError(f"n_chars must be a positive whole number, got {n_chars!r}")
    if not prompt:
        raise ValueError("prompt must hold at least one character")


def arm_samples(models: dict[str, TinyLlama], prompt: str, n_chars: int, seed: int = 0,
                temperature: float = 1.0) -> pd.DataFrame:
    """One row per arm (label, greedy, sampled): `n_chars` characters following `prompt`,
    greedy (the argmax) and drawn at `temperature` with the generator seeded by `seed`,
    the same seed for every arm, so the arms' texts differ by their weights alone."""
    _check_samples(models, prompt, n_chars)
    ids = encode(prompt)  # (P,)
    rows = []
    for label, model in models.items():
        greedy = sample_text(model, ids, n_chars, temperature=0.0)
        drawn = sample_text(model, ids, n_chars, temperature=temperature, seed=seed)
        rows.append({"label": label, "greedy": decode(greedy), "sampled": decode(drawn)})
    return pd.DataFrame(rows, columns=["label", "greedy", "sampled"])


__all__ = ["loss_by_position", "arm_samples"]
