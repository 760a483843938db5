"""The model chapter's arithmetic and small demonstrations.

Published figures are named constants here, each with its source, so a chapter glues them
instead of typing them: the LLaMA-1 7B configuration sheet. The functions count parameters
from a configuration alone (`component_counts`, tested equal to the built model for every
variant), check that the causal mask leaves every query its own position, and read the
reference's loss curves (the loss of guessing, how long a run dwells on a plateau).
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ..blocks import causal_mask
from ..config import Config

# ---------------------------------------------------------------- configurations

def component_counts(cfg: Config) -> dict[str, int]:
    """Parameters per group, from the configuration alone: the groups of
    `TinyLlama.parameter_breakdown` (embedding, positions, attention, mlp, norms, head)."""
    d, L = cfg.d_model, cfg.n_layers
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    attention = d * q + 2 * d * kv + q * d
    if cfg.mlp == "swiglu":
        mlp = 3 * d * cfg.d_ff  # gate, up, down
        mlp_bias = 2 * cfg.d_ff + d
    else:
        mlp = 2 * d * cfg.gelu_ff  # up, down
        mlp_bias = cfg.gelu_ff + d
    if cfg.bias:
        attention += q + 2 * kv + d
        mlp += mlp_bias
    per_norm = 2 * d if cfg.norm == "layer" else d  # LayerNorm has a bias, RMSNorm does not
    norms_per_layer = 0 if cfg.norm_position == "none" else 2 * per_norm
    final_norm = 0 if cfg.norm_position == "none" else per_norm
    return {"embedding": cfg.vocab_size * d,
            "positions": cfg.max_seq_len * d if cfg.position == "learned" else 0,
            "attention": L * attention,
            "mlp": L * mlp,
            "norms": L * norms_per_layer + final_norm,
            "head": 0 if cfg.tie_embeddings else cfg.vocab_size * d}


# ---------------------------------------------------------------- the causal mask's fill

def every_query_sees_itself(t_q: int, t_k: int, mask_fn=None) -> bool:
    """In the causal mask of `t_q` queries over `t_k` keys (the last t_q positions of t_k),
    query i is allowed its own position t_k - t_q + i, so no row is fully masked."""
    mask = (mask_fn or causal_mask)(t_q, t_k)
    own = torch.arange(t_q) + (t_k - t_q)
    return bool(mask[torch.arange(t_q), own].all())


# ---------------------------------------------------------------- loss levels

def guessing_loss(n_choices: int, of_positions: int = 1, positions: int = 1) -> float:
    """Cross-entropy, averaged over `positions` answer tokens, when `of_positions` of them
    are a uniform guess among `n_choices` and the rest are certain: k·ln(n)/positions."""
    return of_positions * math.log(n_choices) / positions


def plateau_dwell(curves: pd.DataFrame, level: float, tol: float) -> pd.DataFrame:
    """Per run: how many consecutive evaluations its validation loss stayed within `tol`
    of `level` (the longest such stretch), where that stretch began, and the largest
    |training − validation| gap inside it."""
    rows = []
    for run, g in curves.sort_values("step").groupby("run", sort=False):
        near = ((g.val_loss - level).abs() <= tol).to_numpy()
        best, start, i = 0, None, 0
        while i < len(near):
            if near[i]:
                j = i
                while j < len(near) and near[j]:
                    j += 1
                if j - i > best:
                    best, start = j - i, i
                i = j
            else:
                i += 1
        if best:
            stretch = g.iloc[start:start + best]
            gap = float((stretch.train_loss - stretch.val_loss).abs().max())
            first = int(stretch.step.iloc[0])
        else:
            gap, first = float("nan"), None
        rows.append({"run": run, "seed": int(g.seed.iloc[0]), "regime": g.regime.iloc[0],
                     "evaluations": best, "from step": first, "max |train - val|": gap})
    return pd.DataFrame(rows)



__all__ = [ "component_counts",
           "every_query_sees_itself", "guessing_loss", "plateau_dwell"]
