"""The model chapter's arithmetic and small demonstrations.

Published figures are named constants here, each with its source, so the chapter glues
them instead of typing them: the LLaMA-1 7B configuration sheet, the training tokens of
LLaMA-1 and GPT-3, Chinchilla's tokens-per-parameter rule and the FLOP rules of thumb.
The functions count parameters from a configuration alone (`component_counts`, tested
equal to the built model for every variant), apply the compute rules, show what the two
ways of filling a causal mask do to a fully masked row, and read the reference's loss
curves in both data regimes.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ..config import Config

# ---------------------------------------------------------------- published figures

# The LLaMA-1 7B configuration as transformers' LlamaConfig names it. Source: Meta's
# released params.json for 7B (dim 4096, n_layers 32, n_heads 32, norm_eps 1e-06,
# multiple_of 256, giving the 11,008 feed-forward width) and its Hugging Face conversion
# (config.json: vocab_size 32000, max_position_embeddings 2048, untied head); the
# 2,048-token context and the rotary base 10,000 are in Touvron et al. (2023).
LLAMA1_7B_SHEET = {
    "hidden_size": 4096,
    "intermediate_size": 11_008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32_000,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10_000.0,
    "tie_word_embeddings": False,
    "max_position_embeddings": 2048,
}

# Each LlamaConfig field of the sheet and the field of our Config that holds the same
# setting (`llamanat_core.hf.llama_config` maps them the same way; a test checks it).
SHEET_TO_CONFIG = {
    "hidden_size": "d_model",
    "intermediate_size": "d_ff",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads",
    "vocab_size": "vocab_size",
    "rms_norm_eps": "norm_eps",
    "rope_theta": "rope_theta",
    "tie_word_embeddings": "tie_embeddings",
    "max_position_embeddings": "max_seq_len",
}

# Hoffmann et al. (2022), "Training compute-optimal large language models": about 20
# training tokens per parameter minimise the loss for a given training compute.
CHINCHILLA_TOKENS_PER_PARAMETER = 20

# Kaplan et al. (2020), "Scaling laws for neural language models", section 2.1 (used by
# Hoffmann et al. as C = 6ND): a forward pass costs about 2 FLOPs per parameter per token
# (one multiply and one add per weight), and training, forward plus backward, about 6.
TRAINING_FLOPS_PER_PARAMETER_TOKEN = 6
INFERENCE_FLOPS_PER_PARAMETER_TOKEN = 2

# Brown et al. (2020), "Language models are few-shot learners": GPT-3 has 175 billion
# parameters and was trained on 300 billion tokens (section 2.2, Table D.1).
GPT3_PARAMETERS = 175e9
GPT3_TRAINING_TOKENS = 300e9

# Touvron et al. (2023), Table 2: training tokens of the four LLaMA-1 models.
LLAMA1_TRAINING_TOKENS = {"LLaMA-1 7B": 1.0e12, "LLaMA-1 13B": 1.0e12,
                          "LLaMA-1 33B": 1.4e12, "LLaMA-1 65B": 1.4e12}


# ---------------------------------------------------------------- configurations

def sheet_config(sheet: dict | None = None) -> Config:
    """Our `Config` for a LlamaConfig sheet, through transformers' own `LlamaConfig` and
    `hf.config_from_transformers` (the 7B sheet by default)."""
    from transformers import LlamaConfig

    from ..hf import config_from_transformers

    return config_from_transformers(LlamaConfig(**(LLAMA1_7B_SHEET if sheet is None else sheet)))


def _hf_value(hf_config, name: str):
    if name == "rope_theta":  # transformers 5 keeps it inside rope_parameters
        return (getattr(hf_config, "rope_parameters", None) or {}).get("rope_theta",
                                                                      getattr(hf_config, name, None))
    return getattr(hf_config, name)


def sheet_table(sheet: dict | None = None, ours: Config | None = None) -> pd.DataFrame:
    """One row per field of the sheet: its LlamaConfig name and value, our field name,
    the value our `Config` takes for the sheet, and the value of `ours` (the reference)."""
    from ..config import REFERENCE

    sheet = LLAMA1_7B_SHEET if sheet is None else sheet
    ours = REFERENCE if ours is None else ours
    big = sheet_config(sheet)
    rows = []
    for hf_name, value in sheet.items():
        field = SHEET_TO_CONFIG[hf_name]
        rows.append({"LlamaConfig field": hf_name, "sheet": value, "Config field": field,
                     "as our Config": getattr(big, field), "our reference": getattr(ours, field)})
    return pd.DataFrame(rows).set_index("LlamaConfig field")


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


# ---------------------------------------------------------------- compute

def training_flops(parameters: float, tokens: float) -> float:
    """Training compute, C ≈ 6·N·D FLOPs."""
    return TRAINING_FLOPS_PER_PARAMETER_TOKEN * parameters * tokens


def inference_flops(parameters: float, tokens: float = 1) -> float:
    """Generating `tokens` tokens, ≈ 2·N FLOPs each (the forward pass alone)."""
    return INFERENCE_FLOPS_PER_PARAMETER_TOKEN * parameters * tokens


def chinchilla_optimal(compute: float,
                       tokens_per_parameter: float = CHINCHILLA_TOKENS_PER_PARAMETER) -> tuple[float, float]:
    """The model size N and tokens D that spend `compute` at the rule's ratio D = r·N:
    C = 6·N·r·N, so N = sqrt(C / (6 r)). -> (N, D)"""
    n = math.sqrt(compute / (TRAINING_FLOPS_PER_PARAMETER_TOKEN * tokens_per_parameter))
    return n, tokens_per_parameter * n


# ---------------------------------------------------------------- the causal mask's fill

def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor, fill: float) -> torch.Tensor:
    """Softmax over the last axis after writing `fill` where `allowed` is False (our
    `manual_attention` writes -inf with masked_fill; transformers adds finfo(dtype).min)."""
    return scores.masked_fill(~allowed, fill).softmax(-1)


def transformers_fill(dtype: torch.dtype = torch.float32) -> float:
    """The value transformers' eager attention mask holds at a masked position (read off
    `transformers.masking_utils.eager_mask`, not assumed)."""
    from transformers.masking_utils import eager_mask

    mask = eager_mask(batch_size=1, q_length=2, kv_length=2, dtype=dtype)
    return float(mask[0, 0, 0, 1])  # query 0 may not see key 1


def every_query_sees_itself(t_q: int, t_k: int, mask_fn=None) -> bool:
    """In the causal mask of `t_q` queries over `t_k` keys (the last t_q positions of t_k),
    query i is allowed its own position t_k - t_q + i, so no row is fully masked."""
    from ..blocks import causal_mask

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


# ---------------------------------------------------------------- what the trained maps show

# The chain token each sum digit is, and the operand digits of its column
# (`mechanism.addition_attention` names them so).
SUM_COLUMNS = {"sum 1": ("a units", "b units"), "sum 2": ("a tens", "b tens"),
               "sum 3": ("a hundreds", "b hundreds")}


def queried_value_mass(summary: pd.DataFrame, layer: int) -> pd.Series:
    """Per head of `layer`: the attention mass the answer position puts on the queried
    value (from a `mechanism.recall_attention` frame, at its training length)."""
    d = summary[(summary.role == "queried value") & (summary.layer == layer)]
    if d.empty:
        raise ValueError(f"no 'queried value' rows for layer {layer}")
    return d.set_index("head").mass.sort_index()


def column_reading(summary: pd.DataFrame) -> pd.DataFrame:
    """Per sum digit: the largest mass any single head (any layer) puts on the two operand
    digits of that digit's column, and which head it is (from a
    `mechanism.addition_attention` frame; the sum-digit rows of `rope.column_reads`)."""
    from .rope import column_reads

    missing = [t for t in SUM_COLUMNS if t not in set(summary.target)]
    if missing:
        raise ValueError(f"no rows for {missing[0]!r}")
    r = column_reads(summary).loc[list(SUM_COLUMNS)]
    return pd.DataFrame({"mass": r["column"], "layer": r["column layer"],
                         "head": r["column head"]}).rename_axis("target")


__all__ = ["LLAMA1_7B_SHEET", "SHEET_TO_CONFIG", "CHINCHILLA_TOKENS_PER_PARAMETER",
           "TRAINING_FLOPS_PER_PARAMETER_TOKEN", "INFERENCE_FLOPS_PER_PARAMETER_TOKEN",
           "GPT3_PARAMETERS", "GPT3_TRAINING_TOKENS", "LLAMA1_TRAINING_TOKENS", "sheet_config",
           "sheet_table", "component_counts", "training_flops", "inference_flops",
           "chinchilla_optimal", "masked_softmax", "transformers_fill", "every_query_sees_itself",
           "guessing_loss", "plateau_dwell", "SUM_COLUMNS", "queried_value_mass", "column_reading"]
