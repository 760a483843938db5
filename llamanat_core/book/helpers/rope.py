"""Probes for the RoPE chapter: the rotation's frequencies, offset invariance, norm
preservation, why V stays unrotated, the two pairings, and the rows of a learned position
table that a short training length never reaches.

Everything here runs on random tensors, freshly initialised models or one step of the
study's own training step; nothing here trains a model. The last section reads the attention
summaries of `llamanat_core.book.mechanism` (computed on the committed weights): which operand
digits an addition chain position reads, and how far into a long recall list the answer
position still finds the value it was asked for.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ...data.tasks import TRAIN_PAIRS, VOCAB_SIZE, Recall
from ...model.blocks import causal_mask, manual_attention, repeat_kv
from ...model.config import Config, variant_config
from ...model.model import TinyLlama
from ...model.positional import (
    RotaryEmbedding,
    apply_rotary,
    interleaved_to_half_permutation,
    inverse_frequencies,
    permute_qk_state,
)
from ...train.loop import Budget, PlainStep


def frequency_table(head_dim: int = 16, theta: float = 10_000.0) -> pd.DataFrame:
    """One row per rotating pair: its channels in both pairings, its angle per position
    theta^(-2i/d) in radians, and the positions it needs to turn once (2*pi / angle)."""
    freq = inverse_frequencies(head_dim, theta).double()
    half = head_dim // 2
    return pd.DataFrame({
        "pair i": range(half),
        "half-split channels": [f"({i}, {i + half})" for i in range(half)],
        "interleaved channels": [f"({2 * i}, {2 * i + 1})" for i in range(half)],
        "radians per position": freq.tolist(),
        "positions per turn": (2 * math.pi / freq).tolist(),
    }).set_index("pair i")


def rotate(x: torch.Tensor, positions, theta: float = 10_000.0, pairing: str = "half") -> torch.Tensor:
    """x (..., D) placed at each of `positions`: returns (..., len(positions), D)."""
    positions = torch.as_tensor(list(positions))
    d = x.shape[-1]
    cos, sin = RotaryEmbedding(d, theta, pairing, int(positions.max()) + 1)(0, int(positions.max()) + 1)
    xs = x.unsqueeze(-2).expand(*x.shape[:-1], len(positions), d)  # (..., P, D)
    return apply_rotary(xs, cos[positions], sin[positions], pairing)


def offset_scores(n: int = 16, head_dim: int = 16, theta: float = 10_000.0, seed: int = 0,
                  pairing: str = "half") -> torch.Tensor:
    """(n, n) scores of one query vector placed at m and one key vector placed at k."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(head_dim, generator=g), torch.randn(head_dim, generator=g)
    qs, ks = rotate(q, range(n), theta, pairing), rotate(k, range(n), theta, pairing)  # (n, D)
    return qs @ ks.T  # [m, k]


def diagonal_deviation(scores: torch.Tensor) -> float:
    """Largest spread (max - min) of the scores along any diagonal m - n = const."""
    n = scores.shape[0]
    return max((scores.diagonal(off).max() - scores.diagonal(off).min()).item()
               for off in range(-(n - 1), n))


def norm_change(n_vectors: int = 256, head_dim: int = 16, positions: int = 48,
                theta: float = 10_000.0, seed: int = 0, pairing: str = "half") -> float:
    """Max |‖R_m x‖ / ‖x‖ - 1| over random vectors and positions 0..positions-1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_vectors, head_dim, generator=g)
    y = rotate(x, range(positions), theta, pairing)  # (N, P, D)
    return (y.norm(dim=-1) / x.norm(dim=-1, keepdim=True) - 1).abs().max().item()


def _attention_rotating_v(attn, x, rope):
    """A counterfactual, NOT the model: the layer's attention with V rotated like Q and K."""
    cfg = attn.cfg
    b, t, _ = x.shape
    q = attn.q_proj(x).view(b, t, cfg.n_heads, cfg.head_dim).transpose(1, 2)
    k = attn.k_proj(x).view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
    v = attn.v_proj(x).view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
    q, k, v = (apply_rotary(z, *rope, cfg.rope_pairing) for z in (q, k, v))
    k, v = repeat_kv(k, cfg.n_rep), repeat_kv(v, cfg.n_rep)
    out = manual_attention(q, k, v, causal_mask(t, t))
    return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


@torch.no_grad()
def value_checks(seed: int = 0, length: int = 13, shift: int = 20, init_std: float = 0.1) -> dict[str, float]:
    """Two checks on one attention layer (the package's, and the counterfactual with V rotated).

    shift: max |out(x at positions 0..T-1) - out(x at positions s..s+T-1)|, relative to
    the output's scale. Only offsets matter to the real layer, so moving the whole
    sequence changes nothing.
    same_content: every token carries the same vector; max spread of the output across
    positions, relative to its scale. Averaging copies of one value returns that value
    whatever the weights, unless each copy was turned by its position first.
    `init_std` above the reference 0.02 makes the random attention pattern less uniform.
    """
    cfg = Config(init_std=init_std)
    model = TinyLlama(cfg, seed=seed).eval()
    attn, rotary = model.layers[0].self_attn, model.rotary
    g = torch.Generator().manual_seed(seed + 100)
    x = torch.randn(1, length, cfg.d_model, generator=g)
    same = x[:, :1].expand(1, length, cfg.d_model)
    out = {}
    layers = {"real": attn, "rotated_v": lambda z, r: _attention_rotating_v(attn, z, r)}
    for name, fn in layers.items():
        a, b = fn(x, rotary(0, length)), fn(x, rotary(shift, length))
        out[f"shift_{name}"] = ((a - b).abs().max() / a.abs().max()).item()
        c = fn(same, rotary(0, length))
        out[f"same_content_{name}"] = ((c - c[:, :1]).abs().max() / c.abs().max()).item()
    return out


def permutation_table(head_dim: int = 16) -> pd.DataFrame:
    """Half-split channel j takes interleaved channel perm[j]; both rotate in pair j mod d/2."""
    perm = interleaved_to_half_permutation(head_dim).tolist()
    return pd.DataFrame({"half-split channel": range(head_dim), "interleaved channel": perm,
                         "rotates in pair": [j % (head_dim // 2) for j in range(head_dim)]}
                        ).set_index("half-split channel")


@torch.no_grad()
def pairing_logits(seed: int = 0, batch: int = 4, length: int = 25,
                   init_std: float = 0.1) -> dict[str, float]:
    """An interleaved model's weights loaded into a half-split model, with and without the
    Q/K row permutation: max |logit difference| against the interleaved model itself.

    At the reference init (std 0.02) random attention is nearly uniform, which hides a
    wrong pairing; a larger `init_std` makes the unpermuted control visibly wrong."""
    cfg_i = Config(rope_pairing="interleaved", init_std=init_std)
    cfg_h = cfg_i.replace(rope_pairing="half")
    inter = TinyLlama(cfg_i, seed=seed).eval()
    g = torch.Generator().manual_seed(seed + 200)
    ids = torch.randint(0, VOCAB_SIZE, (batch, length), generator=g)
    ref = inter(ids)
    state = inter.state_dict()
    permuted = permute_qk_state(state, cfg_h.n_heads, cfg_h.n_kv_heads, cfg_h.head_dim, to="half")
    out = {"logit_scale": ref.abs().max().item()}
    for name, sd in (("permuted", permuted), ("unpermuted", state)):
        half = TinyLlama(cfg_h, seed=None).eval()
        half.load_state_dict(sd)
        out[name] = (half(ids) - ref).abs().max().item()
    return out


def untouched_rows(seed: int = 0, n_pairs: int = TRAIN_PAIRS, batch: int = 64,
                   budget: Budget = Budget()) -> dict:
    """The learned table of the `abs_pos` control on one training batch of recall.

    One step of the study's own `train.loop.PlainStep` (the study's lr and clipping, torch's
    default weight decay): the gradient it applied to each row of the position table, and
    what the step did to a row whose gradient is exactly zero: Adam's moments stay zero,
    so only the decoupled weight decay acts, multiplying the row by (1 - lr * weight_decay).
    """
    cfg = variant_config("abs_pos")
    model = TinyLlama(cfg, seed=seed)
    data = Recall(seed, n_pairs).splits(batch, 0, 0).train
    seen = data.ids.shape[1] - 1  # the model reads ids[:, :-1]: positions 0..seen-1
    table = model.embed_positions.weight
    before = table.detach().clone()
    step = PlainStep(model, data.answer_len, budget.lr, budget.clip)
    step(data.ids)
    grad, after = table.grad.detach(), table.detach()  # the gradient as clipped and applied
    wd = step.opt.param_groups[0]["weight_decay"]
    factor = 1 - budget.lr * wd
    return {
        "seen": seen, "rows": table.shape[0], "weight_decay": wd, "lr": budget.lr,
        "grad_row_norm": grad.norm(dim=-1).tolist(),
        "max_grad_seen": grad[:seen].abs().max().item(),
        "min_grad_row_norm_seen": grad[:seen].norm(dim=-1).min().item(),
        "max_grad_unseen": grad[seen:].abs().max().item(),
        "step_factor": factor,
        "max_step_deviation": (after[seen:] - before[seen:] * factor).abs().max().item(),
        "init_row_norm_seen": before[:seen].norm(dim=-1).mean().item(),
        "init_row_norm_unseen": before[seen:].norm(dim=-1).mean().item(),
        "init_row_norm_expected": cfg.init_std * math.sqrt(cfg.d_model),
    }
