"""Probes for the norm chapter: RMSNorm against LayerNorm, the eps failure, and a deep
random-weights stack under pre-, post- and no normalisation.

Everything here runs on random tensors or freshly initialised models; nothing trains.
"""
from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from ..blocks import RMSNorm
from ..config import Config
from ..model import TinyLlama
from ..tasks import VOCAB_SIZE


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


@torch.no_grad()
def hand_check(vectors: dict[str, list[float]], eps: float = 1e-5) -> pd.DataFrame:
    """RMSNorm and LayerNorm (unit gain, zero bias) of a few short vectors, one row each."""
    rows = []
    for name, v in vectors.items():
        x = torch.tensor(v, dtype=torch.float32)
        rms, ln = norm_pair(len(v), eps)
        rows.append({"input": name, "mean": x.mean().item(), "mean square": x.pow(2).mean().item(),
                     "RMSNorm": _fmt_vec(rms(x)), "LayerNorm": _fmt_vec(ln(x))})
    return pd.DataFrame(rows).set_index("input")


def _fmt_vec(x: torch.Tensor, digits: int = 3) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in x.tolist()) + "]"


@torch.no_grad()
def eps_table(dim: int = 64, eps_values=(0.0, 1e-5)) -> pd.DataFrame:
    """Both norms on an all-zero vector: eps = 0 divides 0 by 0 and returns NaN."""
    x = torch.zeros(dim)
    rows = []
    for eps in eps_values:
        for name, norm in zip(("RMSNorm", "LayerNorm"), norm_pair(dim, eps)):
            y = norm(x)
            rows.append({"norm": name, "eps": f"{eps:g}", "NaN outputs": int(torch.isnan(y).sum()),
                         "max |output|": float(y.abs().max()),  # nan if any entry is nan
                         "first entries": _fmt_vec(y[:3], 1)})
    return pd.DataFrame(rows)


def norm_parameters(model: TinyLlama) -> tuple[int, int]:
    """(number of norm modules, parameters in them) of a model."""
    norms = [m for m in model.modules() if isinstance(m, (RMSNorm, nn.LayerNorm))]
    return len(norms), sum(p.numel() for m in norms for p in m.parameters())


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
    ratio for the final logits. A stream that overflows float32 shows NaN.
    """
    cfg = Config(n_layers=n_layers, norm_position=norm_position, init_std=init_std)
    model = TinyLlama(cfg, seed=seed).eval()
    g = torch.Generator().manual_seed(data_seed)
    ids = torch.randint(0, VOCAB_SIZE, (batch, length), generator=g)  # (B, T)
    direction = torch.randn(batch, length, cfg.d_model, generator=g)  # (B, T, C)

    states: list[torch.Tensor] = []
    shift: list[torch.Tensor | None] = [None]

    def on_embedding(module, inputs, out):
        out = out if shift[0] is None else out + shift[0]
        states.append(out)
        return out

    hooks = [model.embed_tokens.register_forward_hook(on_embedding)]
    hooks += [layer.register_forward_hook(lambda m, i, o: states.append(o)) for layer in model.layers]
    try:
        clean_logits = model(ids)
        clean = states[:]
        states.clear()
        e = clean[0]
        shift[0] = direction / direction.norm(dim=-1, keepdim=True) * e.norm(dim=-1, keepdim=True) * rel
        noisy_logits = model(ids)
        noisy = states[:]
    finally:
        for h in hooks:
            h.remove()

    def relchange(a, b):
        if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            return float("nan")  # an overflowed stream has no meaningful relative change
        a, b = a.double(), b.double()  # squares of a huge but finite stream fit in float64
        return _finite(((b - a).norm() / a.norm()).item() / rel)

    rows = [{"layer": depth, "rms": _finite(a.double().pow(2).mean().sqrt().item()),
             "sensitivity": relchange(a, b)}
            for depth, (a, b) in enumerate(zip(clean, noisy))]
    return pd.DataFrame(rows), relchange(clean_logits, noisy_logits)


def _finite(v: float) -> float:
    """inf and NaN both mean the stream overflowed float32: report them as NaN."""
    return v if math.isfinite(v) else float("nan")


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


def seed_range_text(values, digits: int = 3) -> str:
    """'m (seeds a to b)' for finite values; says how many seeds overflowed otherwise."""
    vals = [float(v) for v in values]
    ok = [v for v in vals if math.isfinite(v)]
    if not ok:
        return f"not finite in any of {len(vals)} seeds"
    lo, hi = _num(min(ok), digits), _num(max(ok), digits)
    mean = _num(sum(ok) / len(ok), digits)
    s = f"{mean} in every seed" if lo == hi else f"{mean} (seeds range {lo} to {hi})"
    if len(ok) < len(vals):
        s += f", not finite in {len(vals) - len(ok)} of {len(vals)} seeds"
    return s



def _num(v: float, digits: int = 3) -> str:
    """digits significant figures, without exponent notation up to 10^6."""
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    return f"{float(f'{v:.{digits}g}'):g}" if v else "0"


def overflow_sentence(overflow_layers) -> str:
    """Where a stack's stream stopped being finite, across seeds, as a phrase."""
    layers = [v for v in overflow_layers if v is not None and v == v]  # drop None and NaN
    n = len(list(overflow_layers))
    if not layers:
        return f"stays finite through every layer in all {n} seeds"
    lo, hi = int(min(layers)), int(max(layers))
    where = f"at depth {lo}" if lo == hi else f"between depth {lo} and {hi}"
    return f"overflows float32 (the values become inf, then NaN) {where} in {len(layers)} of {n} seeds"


def ratio_sentence(ratio: float, close: float = 1.5) -> str:
    """How far apart the placements' means are, as a clause generated from their ratio."""
    s = f"the largest of the three means is {ratio:.2f} times the smallest"
    if ratio < close:
        return s + ", so at this scale the placement barely shapes the forward pass at the start of training."
    return s + ", so the placement already shapes the forward pass at the start of training."
