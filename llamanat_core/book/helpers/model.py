"""The model chapter's arithmetic and small demonstrations.

Published figures are named constants here, each with its source, so a chapter glues them
instead of typing them: LLaMA-1's training tokens, Chinchilla's tokens per parameter and
the FLOP rules of thumb. The functions count parameters from a configuration alone
(`component_counts`, tested equal to the built model for every variant; `published_counts`
for LLaMA-1 7B to 65B against the paper), apply the compute rules, build an attention
layer that turns one-hot tokens into given Q, K and V (the hand check), show what the two
ways of filling a causal mask do to a fully masked row, and read the reference's loss
curves (the loss of guessing, how long a run dwells on a plateau).
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ...analysis.report import split_rows
from ...model.blocks import Attention, causal_mask
from ...model.config import Config
from ...model.published import PUBLISHED, PublishedModel, llama_ffn_rule, llama_parameters

# ---------------------------------------------------------------- published figures

# Hoffmann et al. (2022), "Training compute-optimal large language models": about 20
# training tokens per parameter minimise the loss for a given training compute.
CHINCHILLA_TOKENS_PER_PARAMETER = 20

# Kaplan et al. (2020), section 2.1, the rule Hoffmann et al. use as C = 6ND: a forward
# pass costs about 2 FLOPs per parameter per token (a multiply and an add per weight), and
# training, forward and backward, about 6.
TRAINING_FLOPS_PER_PARAMETER_TOKEN = 6
INFERENCE_FLOPS_PER_PARAMETER_TOKEN = 2

# Touvron et al. (2023), Table 2: the training tokens of the four LLaMA-1 models.
LLAMA1_TRAINING_TOKENS = {"LLaMA-1 7B": 1.0e12, "LLaMA-1 13B": 1.0e12,
                          "LLaMA-1 33B": 1.4e12, "LLaMA-1 65B": 1.4e12}


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


def paper_billions(count: int) -> float:
    """A parameter count as the LLaMA paper writes it: billions cut (not rounded) to one
    decimal, 65,285,660,672 -> 65.2."""
    return math.floor(count / 1e8) / 10


def published_counts(models: tuple[PublishedModel, ...] = PUBLISHED[:4]) -> pd.DataFrame:
    """LLaMA-1 7B to 65B from their configurations: the feed-forward width by LLaMA's rule,
    the exact count (untied head, vocabulary 32,000), that count as the paper writes it,
    and the paper's figure. One row per model."""
    rows = []
    for m in models:
        count = llama_parameters(m)
        rows.append({"model": m.name, "d_model": m.dim, "layers": m.n_layers,
                     "FFN hidden (rule)": llama_ffn_rule(m.dim), "parameters": count,
                     "cut to 0.1B": paper_billions(count), "paper (B)": m.paper_params})
    return pd.DataFrame(rows).set_index("model")


# ---------------------------------------------------------------- compute

def training_flops(parameters: float, tokens: float) -> float:
    """Training compute, C ≈ 6·N·D FLOPs."""
    return TRAINING_FLOPS_PER_PARAMETER_TOKEN * parameters * tokens


def inference_flops(parameters: float, tokens: float = 1) -> float:
    """Generating `tokens` tokens, ≈ 2·N FLOPs each (the forward pass alone)."""
    return INFERENCE_FLOPS_PER_PARAMETER_TOKEN * parameters * tokens


def chinchilla_tokens(parameters: float) -> float:
    """The training tokens Chinchilla's rule gives a model of `parameters`: about 20 each."""
    return CHINCHILLA_TOKENS_PER_PARAMETER * parameters


def compute_table(models: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """name -> (parameters N, training tokens D): one row each with columns N, D, D/N
    (tokens per parameter), 20N (Chinchilla's tokens for N), 6ND (the training FLOPs)
    and 2N (the FLOPs of one generated token)."""
    rows = [{"model": name, "N": n, "D": d, "D/N": d / n, "20N": chinchilla_tokens(n),
             "6ND": training_flops(n, d), "2N": inference_flops(n)}
            for name, (n, d) in models.items()]
    return pd.DataFrame(rows).set_index("model")


def budget_tokens(steps: int, batch_size: int, positions: int) -> int:
    """Token positions a run feeds the model: steps × items per batch × positions per item."""
    return steps * batch_size * positions


# ---------------------------------------------------------------- attention by hand

@torch.no_grad()
def attention_for(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """A one-head attention layer (the package's `Attention`, no rotary positions) whose
    projections turn the one-hot tokens `eye(T, C)` into exactly q, k and v (T, C), and
    whose output projection is the identity. -> (layer, x (1, T, C))."""
    t, c = q.shape
    layer = Attention(Config(d_model=c, n_heads=1, n_kv_heads=1, head_dim=c), layer=0).eval()
    for proj, rows in ((layer.q_proj, q), (layer.k_proj, k), (layer.v_proj, v)):
        weight = torch.zeros(c, c)
        weight[:, :t] = rows.T  # token i (one-hot e_i) reads column i: row i of q, k or v
        proj.weight.copy_(weight)
    layer.o_proj.weight.copy_(torch.eye(c))
    return layer, torch.eye(t, c)[None]  # (1, T, C)


# ---------------------------------------------------------------- the causal mask's fill

def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor, fill: float) -> torch.Tensor:
    """Softmax over the last axis after writing `fill` where `allowed` is False (the
    package writes -inf with masked_fill; transformers adds finfo(dtype).min)."""
    return scores.masked_fill(~allowed, fill).softmax(-1)


def transformers_fill(dtype: torch.dtype = torch.float32) -> float:
    """The value transformers' eager attention mask holds at a masked position (read off
    `transformers.masking_utils.eager_mask`, not assumed)."""
    from transformers.masking_utils import eager_mask  # heavy: only where transformers is compared

    mask = eager_mask(batch_size=1, q_length=2, kv_length=2, dtype=dtype)
    return float(mask[0, 0, 0, 1])  # query 0 may not see key 1


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



# ---------------------------------------------------------------- the study's seeds

def split_summary(results: pd.DataFrame) -> dict:
    """The rows (task, regime, variant) whose seeds split at their last checkpoint, one
    ending solved and another unsolved (`report.split_rows`): how many (`split`), out of
    how many rows (`rows`), the step they are read at (`step`, the latest) and whether
    every run was read at that one step (`one_step`)."""
    last = results[results["final"]]
    split = split_rows(last)
    return {"split": int(split.sum()), "rows": len(split), "step": int(last.step.max()),
            "one_step": last.step.nunique() == 1}


__all__ = ["CHINCHILLA_TOKENS_PER_PARAMETER", "LLAMA1_TRAINING_TOKENS", "attention_for",
           "budget_tokens", "chinchilla_tokens", "component_counts", "compute_table",
           "every_query_sees_itself", "guessing_loss", "inference_flops", "masked_softmax",
           "paper_billions", "plateau_dwell", "published_counts", "split_summary", "training_flops",
           "transformers_fill"]
