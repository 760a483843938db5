"""The SwiGLU chapter's measurements: gate or switch, and the width rule.

Three hidden layers are compared on the same input:

* ``relu``   – relu(up(x)): a switch, each unit either passes or is exactly zero;
* ``gelu``   – gelu(up(x)): the displaced two-matrix MLP of the `gelu_mlp` control;
* ``swiglu`` – silu(gate(x)) * up(x): LLaMA's gated unit, a smooth multiplier on up(x).

ReLU and GELU read the *same* up projection (the `gelu_mlp` control's), so the two
differ only in the function applied to identical pre-activations.
"""
from __future__ import annotations

import copy

import pandas as pd
import torch
import torch.nn.functional as F

from ...model.config import REFERENCE, Config, variant_config
from ...model.model import TinyLlama
from ...model.published import PUBLISHED, llama_ffn_rule
from ...study import kept_run, trained_weights, weights_step
from ...train.loop import fit, run_splits
from ...util import torch_threads
from ..mechanism import call_arguments

KINDS = ("relu", "gelu", "swiglu")


# The input batch has its own generator seed, far from the model seeds: the model's
# initialisation draws from a generator seeded with the model seed, and a batch drawn from
# the same seed would repeat the weights' random numbers (inputs aligned with weight rows).
BATCH_SEED = 1_000_003


def random_batch(n_tokens: int = 4096, d_model: int = 64, seed: int = BATCH_SEED) -> torch.Tensor:
    """A fixed batch of standard-normal vectors (n_tokens, d_model): roughly unit RMS,
    which is what the RMSNorm in front of every MLP hands it at initialisation."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_tokens, d_model, generator=g)


@torch.no_grad()
def hidden_units(kind: str, x: torch.Tensor, seed: int = 0, layer: int = 0) -> torch.Tensor:
    """Hidden activations (n, width) of the first-layer MLP of a freshly initialised model.

    The weights are exactly those a trained run of that seed starts from: `swiglu` from
    the reference, `relu` and `gelu` from the `gelu_mlp` control (same up projection).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    variant = "llama" if kind == "swiglu" else "gelu_mlp"
    mlp = TinyLlama(variant_config(variant), seed=seed).layers[layer].mlp
    if kind == "relu":
        return F.relu(mlp.up_proj(x))
    return mlp.hidden(x)


def float32_zero_edge(fn, lo: float = -200.0, hi: float = 0.0, iters: int = 60) -> float:
    """The largest negative z at which fn(z) is exactly 0.0 in float32 (bisection).

    Mathematically gelu(z) and silu(z) are never 0 for z < 0; in float32 they round to
    exactly 0 once the factor Phi(z) or sigmoid(z) underflows. Returns -inf if fn(lo) != 0.
    """
    def is_zero(z: float) -> bool:
        return bool(fn(torch.tensor(z, dtype=torch.float32)) == 0)

    if not is_zero(lo):
        return float("-inf")
    for _ in range(iters):  # invariant: fn(lo) == 0, fn(hi) != 0 (or hi == 0)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if is_zero(mid) else (lo, mid)
    return lo


def zero_share(h: torch.Tensor) -> float:
    """Fraction of hidden values that are exactly 0.0 (no tolerance)."""
    return float((h == 0).sum()) / h.numel()


def negative_share(h: torch.Tensor) -> float:
    """Fraction of hidden values below zero (a ReLU switch can never produce one)."""
    return float((h < 0).sum()) / h.numel()


def zero_table(seeds=(0, 1, 2, 3, 4), n_tokens: int = 4096,
               batch_seed: int = BATCH_SEED) -> pd.DataFrame:
    """Tidy frame (kind, seed, zero, negative, width) on one fixed random batch,
    one row per initialisation seed and hidden-layer kind."""
    x = random_batch(n_tokens, REFERENCE.d_model, batch_seed)
    rows = []
    for kind in KINDS:
        for s in seeds:
            h = hidden_units(kind, x, s)
            rows.append({"kind": kind, "seed": int(s), "zero": zero_share(h),
                         "negative": negative_share(h), "width": int(h.shape[1])})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- trained weights

def reference_model(task: str, fresh: bool = False,
                    steps: int | None = None) -> tuple[TinyLlama, str, torch.Tensor]:
    """The trained seed-0 reference of a task, where it came from, and the inputs to probe.

    fresh=False: the committed weights (artifacts/weights). fresh=True: the weights the
    chapter's own runs saved at `steps`. Either way, if those weights are not there, the
    same run is retrained here (deterministic: one thread, seed 0) and the returned
    description says so. The inputs are the held-out test items
    as the model reads them in training (every position but the last).
    """
    run = kept_run(task, "llama", 0, steps, fresh)
    budget = run.budget
    ids = run_splits(run.spec, 0, budget)[1].test.ids[:, :-1]
    model, path = trained_weights(task, "llama", 0, steps, fresh)  # committed, or the chapter's runs'
    if model is not None:
        where = "retrained here" if fresh else "committed"
        return model, f"the {where} seed-0 reference ({weights_step(path):,} steps)", ids
    # No weights at hand (fresh runs that did not keep them, or a study that keeps its
    # weights at another budget): train the same run here, deterministically, rather than fail.
    with torch_threads(1):
        # (the committed study's run follows LLAMANAT_COMPILE here: None)
        model = fit(run.config, run.spec, 0, budget, compile=run.compile if fresh else None).model.eval()
    return model, f"the seed-0 reference retrained here for {budget.steps:,} steps", ids


@torch.no_grad()
def trained_hidden(model: TinyLlama, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run ids (B, T) through the model and return, over every layer and position,
    the gate and up pre-activations (`gate`, `up`) and the SwiGLU hidden units
    (`hidden` = silu(gate) * up), flattened, in float64.

    The trained float32 weights are evaluated in float64 (on a copy; the model is left as
    it is): what float32 would compute, without float32's rounding, which differs from
    one CPU's kernels to another's and would move the chapter's figures by a pixel.
    """
    model = copy.deepcopy(model).double()
    mlps = [layer.mlp for layer in model.layers]
    inputs = [(m, args[0]) for m, args, _ in call_arguments(model, ids, mlps)]
    gate = torch.cat([m.gate_proj(x).flatten() for m, x in inputs])
    up = torch.cat([m.up_proj(x).flatten() for m, x in inputs])
    hidden = torch.cat([m.hidden(x).flatten() for m, x in inputs])
    return {"gate": gate, "up": up, "hidden": hidden}


def gate_summary(gate: torch.Tensor, hidden: torch.Tensor) -> dict[str, float]:
    """What a switch would have done to the trained SwiGLU units.

    zero: share of hidden units exactly 0; gate_negative: share whose gate pre-activation
    is below 0 (a ReLU gate would switch these off); mass_negative_gate: share of the
    total |hidden| carried by those units, which the smooth gate still lets through.
    """
    off = gate < 0
    mass = hidden.abs()
    return {"zero": zero_share(hidden), "gate_negative": float(off.sum()) / off.numel(),
            "mass_negative_gate": float(mass[off].sum() / mass.sum())}


def trained_gates(tasks, fresh: bool = False, steps: int | None = None) -> tuple[dict, dict, pd.DataFrame]:
    """Per task, the trained seed-0 reference's MLP pre-activations (`trained_hidden`) and
    where its weights came from (`reference_model`), and the table of `gate_summary`, one
    row per task (index `task`)."""
    trained, sources = {}, {}
    for task in tasks:
        model, sources[task], ids = reference_model(task, fresh=fresh, steps=steps)
        trained[task] = trained_hidden(model, ids)
    summary = pd.DataFrame({t: gate_summary(trained[t]["gate"], trained[t]["hidden"]) for t in tasks}).T
    summary.index.name = "task"
    return trained, sources, summary


# ---------------------------------------------------------------- three matrices against two

def mlp_parameters(variant: str) -> int:
    """MLP parameters per layer of a variant, counted on the built model."""
    cfg = variant_config(variant)
    return TinyLlama(cfg, seed=None).parameter_breakdown()["mlp"] // cfg.n_layers


def parameter_table(variants=("llama", "gelu_mlp")) -> pd.DataFrame:
    """Each variant's MLP as built: its kind, matrices per layer, hidden width, MLP
    parameters per layer and the whole model's, counted on the built model (index
    `variant`)."""
    rows = []
    for variant in variants:
        cfg = variant_config(variant)
        model = TinyLlama(cfg, seed=None)
        rows.append({"variant": variant, "MLP": "SwiGLU" if cfg.mlp == "swiglu" else "GELU",
                     "matrices": len(list(model.layers[0].mlp.parameters())),
                     "hidden width": cfg.d_ff if cfg.mlp == "swiglu" else cfg.gelu_ff,
                     "MLP parameters per layer": mlp_parameters(variant),
                     "model parameters": model.num_parameters()})
    return pd.DataFrame(rows).set_index("variant")


def width_table(formatted: bool = False) -> pd.DataFrame:
    """LLaMA-1's FFN width rule at the four published sizes, and what it costs per layer
    against a two-matrix MLP of width 4d (the 2017 Transformer's). `formatted` gives
    strings with thousands separators for the page."""
    rows = []
    for m in PUBLISHED:
        if not m.name.startswith("LLaMA-1"):
            continue
        d, h = m.dim, m.ffn_hidden
        rows.append({"model": m.name, "d_model": d, "2/3 · 4d": 8 * d / 3, "hidden (rule)": h,
                     "SwiGLU 3·d·hidden": 3 * d * h, "two-matrix 2·d·4d": 8 * d * d,
                     "SwiGLU / two-matrix": 3 * d * h / (8 * d * d)})
    table = pd.DataFrame(rows).set_index("model")
    if formatted:
        table = table.astype(object)
        for c in table.columns:
            f = {"2/3 · 4d": "{:,.1f}", "SwiGLU / two-matrix": "{:.4f}"}.get(c, "{:,}")
            table[c] = [f.format(v) for v in table[c]]
    return table


def full_width_table() -> pd.DataFrame:
    """SwiGLU at the full width 4d against the width rule, per layer, in weights.

    One row per model: ours (counted on built models: a two-matrix MLP of width 4d, SwiGLU
    at 4d, and the reference SwiGLU, whose 192 is the rule with a multiple of 64 instead
    of 256) and LLaMA-1's four sizes (from the published configurations, 3 · d · hidden).
    The ratios are against the two-matrix MLP of width 4d.
    """
    def counted(cfg: Config) -> int:
        return TinyLlama(cfg, seed=None).parameter_breakdown()["mlp"] // cfg.n_layers

    d = REFERENCE.d_model
    if llama_ffn_rule(d, multiple_of=64) != REFERENCE.d_ff:
        raise AssertionError("the reference SwiGLU width is no longer the rule at multiple 64")
    rows = [{"model": "ours", "d_model": d, "hidden (rule)": REFERENCE.d_ff,
             "two-matrix at 4d": counted(REFERENCE.replace(mlp="gelu", gelu_ff=4 * d)),
             "SwiGLU at 4d": counted(REFERENCE.replace(d_ff=4 * d)),
             "SwiGLU at the rule": counted(REFERENCE)}]
    for m in PUBLISHED:
        if m.name.startswith("LLaMA-1"):
            rows.append({"model": m.name, "d_model": m.dim, "hidden (rule)": m.ffn_hidden,
                         "two-matrix at 4d": 2 * m.dim * 4 * m.dim,
                         "SwiGLU at 4d": 3 * m.dim * 4 * m.dim,
                         "SwiGLU at the rule": 3 * m.dim * m.ffn_hidden})
    t = pd.DataFrame(rows).set_index("model")
    t["SwiGLU at 4d / two-matrix"] = t["SwiGLU at 4d"] / t["two-matrix at 4d"]
    t["rule / two-matrix"] = t["SwiGLU at the rule"] / t["two-matrix at 4d"]
    return t


# ---------------------------------------------------------------- the gate as a kill switch

def gate_bins(gate: torch.Tensor, up: torch.Tensor, hidden: torch.Tensor, edges) -> pd.DataFrame:
    """Hidden values grouped by their gate pre-activation: per bin [lo, hi), how many values,
    the median |up| (what the unit would carry) and the median |silu(gate) · up| (what it
    does carry). Empty bins are left out."""
    g, u, h = gate.flatten(), up.flatten().abs(), hidden.flatten().abs()
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (g >= lo) & (g < hi)
        if m.any():
            rows.append({"gate from": float(lo), "gate to": float(hi), "values": int(m.sum()),
                         "share": float(m.sum()) / g.numel(),
                         "median |up|": float(u[m].median()), "median |hidden|": float(h[m].median())})
    return pd.DataFrame(rows)


def kill_summary(gate: torch.Tensor, up: torch.Tensor, hidden: torch.Tensor,
                 below: float) -> dict[str, float]:
    """The hidden values whose gate pre-activation is below `below` (switched off by the
    gate): their share, their median |up| against the median |up| of all values, and their
    median |hidden|. `factor` is |silu(below)|, the most the gate lets through there."""
    g, u, h = gate.flatten(), up.flatten().abs(), hidden.flatten().abs()
    off = g < below
    n = int(off.sum())
    nan = float("nan")
    factor = float(F.silu(torch.tensor(float(below), dtype=torch.float64)).abs())
    return {"below": float(below), "factor": factor,
            "n": n, "share": n / g.numel(), "min_gate": float(g.min()),
            "median_up_off": float(u[off].median()) if n else nan,
            "median_up_all": float(u.median()),
            "median_hidden_off": float(h[off].median()) if n else nan}
