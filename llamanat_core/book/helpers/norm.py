"""Probes for the norm chapter: RMSNorm against LayerNorm, the eps failure, and a deep
random-weights stack under pre-, post- and no normalisation.

Everything here runs on random tensors or freshly initialised models; nothing trains.
"""
from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from ...data.tasks import VOCAB_SIZE
from ...model.blocks import RMSNorm
from ...model.config import Config
from ...model.model import TinyLlama


def norm_pair(dim: int, eps: float = 1e-5) -> tuple[RMSNorm, nn.LayerNorm]:
    """The package's RMSNorm and torch's LayerNorm as they start: gains 1, LayerNorm bias 0."""
    return RMSNorm(dim, eps), nn.LayerNorm(dim, eps=eps)


@torch.no_grad()
def centred_identity(dim: int = 64, seed: int = 0, eps: float = 1e-5) -> dict[str, float]:
    """Max |RMSNorm(x) - LayerNorm(x)| on a random vector after and before centring it.

    On a centred vector the mean is 0, so LayerNorm's variance is RMSNorm's mean square
    and the two formulas coincide; shifting the vector by a constant separates them.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(dim, generator=g) + 1.0  # deliberately not centred
    centred = x - x.mean()
    rms, ln = norm_pair(dim, eps)
    return {"centred": (rms(centred) - ln(centred)).abs().max().item(),
            "uncentred": (rms(x) - ln(x)).abs().max().item(),
            "mean_before": x.mean().item(),
            "mean_after": centred.mean().item()}


def _fmt_vec(x: torch.Tensor, digits: int = 3) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in x.tolist()) + "]"


@torch.no_grad()
def eps_table(dim: int = 64, eps_values=(0.0, 1e-5)) -> pd.DataFrame:
    """Both norms on an all-zero vector: eps = 0 divides 0 by 0 and returns NaN, which the
    table calls what it is, undefined (0/0), rather than printing NaNs."""
    x = torch.zeros(dim)
    rows = []
    for eps in eps_values:
        for name, norm in zip(("RMSNorm", "LayerNorm"), norm_pair(dim, eps)):
            y = norm(x)
            undefined = int(torch.isnan(y).sum())
            rows.append({"norm": name, "eps": f"{eps:g}", "undefined entries (0/0)": undefined,
                         "max |output|": "undefined" if undefined else f"{float(y.abs().max()):.1f}",
                         "first entries": "undefined" if undefined else _fmt_vec(y[:3], 1)})
    return pd.DataFrame(rows)


def norm_parameters(model: TinyLlama) -> tuple[int, int]:
    """(number of norm modules, parameters in them) of a model."""
    norms = [m for m in model.modules() if isinstance(m, (RMSNorm, nn.LayerNorm))]
    return len(norms), sum(p.numel() for m in norms for p in m.parameters())


def _streams(model: TinyLlama, ids: torch.Tensor,
             shift: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The residual stream at every depth (the embedding, plus `shift` if given, then the
    output of every layer) and the logits of one forward pass."""
    states: list[torch.Tensor] = []

    def on_embedding(module, inputs, out):
        out = out if shift is None else out + shift.to(out.dtype)  # (B, T, C)
        states.append(out)
        return out

    hooks = [model.embed_tokens.register_forward_hook(on_embedding)]
    hooks += [layer.register_forward_hook(lambda m, i, o: states.append(o)) for layer in model.layers]
    try:
        logits = model(ids)
    finally:
        for h in hooks:
            h.remove()
    return states, logits


def _first_overflow(*passes: list[torch.Tensor]) -> int | None:
    """The first depth at which any of the passes' streams is not finite, or None."""
    bad = [d for p in passes for d, x in enumerate(p) if not torch.isfinite(x).all()]
    return min(bad) if bad else None


@torch.no_grad()
def depth_profile(norm_position: str, seed: int, init_std: float = 0.02, n_layers: int = 32,
                  batch: int = 8, length: int = 13, rel: float = 1e-3,
                  data_seed: int = 1234) -> tuple[pd.DataFrame, float]:
    """Run a fixed random batch through a freshly initialised deep stack, twice.

    The second pass adds to every input embedding a random vector of `rel` times its
    norm. Returns (one row per depth, logits sensitivity). Depth 0 is the embedding,
    depth l the residual stream after layer l. Per depth: `rms` of the stream and
    `sensitivity` = relative change of the stream / `rel` (1 means the perturbation
    passes through unchanged in relative size). The logits sensitivity is the same
    ratio for the final logits.

    The model computes in float32, as it trains, only to find where its stream overflows:
    from the first depth at which either float32 pass is no longer finite, both columns
    are NaN. The values themselves come from the same weights in float64. A stack that
    amplifies small changes amplifies float32's rounding (about 1e-7, and different from
    one CPU's kernels to another's) into the digits the chapter shows; float64's rounding
    stays far below them, on any CPU.
    """
    cfg = Config(n_layers=n_layers, norm_position=norm_position, init_std=init_std)
    model = TinyLlama(cfg, seed=seed).eval()
    g = torch.Generator().manual_seed(data_seed)
    ids = torch.randint(0, VOCAB_SIZE, (batch, length), generator=g)  # (B, T)
    direction = torch.randn(batch, length, cfg.d_model, generator=g).double()  # (B, T, C)
    embedding = model.embed_tokens.weight.double()[ids]  # (B, T, C), the float32 table exactly
    shift = direction / direction.norm(dim=-1, keepdim=True) * embedding.norm(dim=-1, keepdim=True) * rel

    overflow = _first_overflow(_streams(model, ids)[0], _streams(model, ids, shift)[0])
    model.double()
    clean, clean_logits = _streams(model, ids)
    noisy, noisy_logits = _streams(model, ids, shift)

    def relchange(a, b):
        return ((b - a).norm() / a.norm()).item() / rel

    nan = float("nan")
    rows = []
    for depth, (a, b) in enumerate(zip(clean, noisy)):
        finite = overflow is None or depth < overflow
        rows.append({"layer": depth, "rms": a.pow(2).mean().sqrt().item() if finite else nan,
                     "sensitivity": relchange(a, b) if finite else nan})
    return pd.DataFrame(rows), relchange(clean_logits, noisy_logits) if overflow is None else nan


def depth_study(positions=("pre", "post", "none"), seeds=(0, 1, 2), init_stds=(0.02,),
                **kwargs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """depth_profile for every (init_std, placement, seed).

    Returns (per-depth frame with columns init_std, norm_position, seed, layer, rms,
    sensitivity; per-model frame with the logits sensitivity and the first depth at which
    the stream is no longer finite, or None)."""
    parts, ends = [], []
    for std in init_stds:
        for pos in positions:
            for seed in seeds:
                prof, logits = depth_profile(pos, seed, init_std=std, **kwargs)
                prof.insert(0, "seed", seed)
                prof.insert(0, "norm_position", pos)
                prof.insert(0, "init_std", std)
                parts.append(prof)
                bad = prof.layer[~prof.rms.map(math.isfinite)]
                ends.append({"init_std": std, "norm_position": pos, "seed": seed,
                             "logits_sensitivity": logits,
                             "overflow_layer": int(bad.min()) if len(bad) else None})
    return pd.concat(parts, ignore_index=True), pd.DataFrame(ends)


# ---------------------------------------------------------------- what each norm computes

def _rms_steps(x: torch.Tensor, gain: torch.Tensor, eps: float):
    """RMSNorm of one vector, step by step; each step with its arithmetic operations."""
    d = x.shape[-1]
    sq = x * x
    ms = sq.sum(-1, keepdim=True) / d
    r = torch.rsqrt(ms + eps)
    y = (x * r) * gain
    steps = [("square every entry", d, 0), ("sum the squares, divide by d", d, 1),
             ("add eps, reciprocal square root", 2, 0), ("scale every entry", d, 0),
             ("multiply by the gain", d, 0)]
    return y, steps


def _layer_steps(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float):
    """LayerNorm of one vector, step by step (the variance waits for the mean)."""
    d = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / d
    c = x - mu
    var = (c * c).sum(-1, keepdim=True) / d
    r = torch.rsqrt(var + eps)
    y = (c * r) * gain + bias
    steps = [("sum the entries, divide by d (the mean)", d, 1), ("subtract the mean", d, 0),
             ("square every centred entry", d, 0), ("sum the squares, divide by d", d, 1),
             ("add eps, reciprocal square root", 2, 0), ("scale every entry", d, 0),
             ("multiply by the gain", d, 0), ("add the bias", d, 0)]
    return y, steps


@torch.no_grad()
def op_counts(dim: int = 64, seed: int = 0, eps: float = 1e-5) -> pd.DataFrame:
    """The arithmetic of each norm on one vector of `dim` channels, one row per step.

    Columns: norm, step, operations (additions, multiplications, divisions, square roots:
    a sum of d numbers is d - 1 additions, its division by d one more, so d), reduction
    (1 where the step reduces the whole vector to one number, which every later step must
    wait for). The steps are executed on a random vector and checked against the package's
    RMSNorm and torch's LayerNorm, so the table counts what the modules compute.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(dim, generator=g)
    gain, bias = 1 + 0.1 * torch.randn(dim, generator=g), 0.1 * torch.randn(dim, generator=g)
    rms, ln = norm_pair(dim, eps)
    rms.weight.copy_(gain)
    ln.weight.copy_(gain)
    ln.bias.copy_(bias)
    rows = []
    for name, (y, steps), ref in (("RMSNorm", _rms_steps(x, gain, eps), rms(x)),
                                  ("LayerNorm", _layer_steps(x, gain, bias, eps), ln(x))):
        if not torch.allclose(y, ref, atol=1e-5):
            raise AssertionError(f"the counted steps of {name} do not compute {name}")
        rows += [{"norm": name, "step": s, "operations": n, "reduction": r} for s, n, r in steps]
    return pd.DataFrame(rows)


def op_totals(dim: int = 64) -> pd.DataFrame:
    """Per norm: operations on one vector of `dim` channels, and the reductions in sequence."""
    t = op_counts(dim).groupby("norm", sort=False)[["operations", "reduction"]].sum()
    return t.rename(columns={"reduction": "reductions"})


def per_token_ops(cfg: Config | None = None) -> dict[str, int]:
    """Arithmetic per token of a model: its norms (RMSNorm or LayerNorm, `op_totals`) and its
    matrix multiplies (a multiply and an add per weight of every linear layer, the tied head
    once). Attention scores, which grow with the length, are left out."""
    cfg = cfg or Config()
    model = TinyLlama(cfg, seed=None)
    n_norms, _ = norm_parameters(model)
    kind = "RMSNorm" if cfg.norm == "rms" else "LayerNorm"
    per_norm = int(op_totals(cfg.d_model).loc[kind, "operations"])
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return {"norms": n_norms * per_norm, "per_norm": per_norm, "n_norms": n_norms,
            "linear": 2 * linear}


