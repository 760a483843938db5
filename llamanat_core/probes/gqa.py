"""The GQA chapter's measurements: which query head reads which KV head, and what the
KV heads cost.

Everything here calls the package's own `repeat_kv`, so the figure and the check show
what the model actually does, not a re-drawing of it.
"""
from __future__ import annotations

import pandas as pd
import torch

from ..blocks import repeat_kv
from ..config import REFERENCE, variant_config
from ..model import TinyLlama
from ..published import kv_cache_bytes

# The three attention layouts of the chapter, most KV heads first.
LAYOUTS = (("mha", "MHA"), ("llama", "GQA"), ("mqa", "MQA"))


def head_map(n_heads: int, n_kv_heads: int, fn=repeat_kv) -> list[int]:
    """For each query head, the KV head it reads, read off `fn` applied to a labelled
    tensor: KV head j holds the value j, so expanded head h holds the index it came from."""
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
    labels = torch.arange(n_kv_heads, dtype=torch.float32).view(1, n_kv_heads, 1, 1)
    expanded = fn(labels, n_heads // n_kv_heads)  # (1, n_heads, 1, 1)
    return [int(v) for v in expanded[0, :, 0, 0]]


def check_repeat_kv(n_heads: int, n_kv_heads: int, fn=repeat_kv, seed: int = 0,
                    batch: int = 2, seq: int = 5, head_dim: int = 16) -> bool:
    """On a random (B, Hkv, T, D) tensor: the output has n_heads heads and head h is
    exactly KV head h // n_rep (every batch item, position and channel)."""
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(batch, n_kv_heads, seq, head_dim, generator=g)
    n_rep = n_heads // n_kv_heads
    out = fn(kv, n_rep)
    if out.shape != (batch, n_heads, seq, head_dim):
        return False
    return all(torch.equal(out[:, h], kv[:, h // n_rep]) for h in range(n_heads))


def draw_head_map(ax, n_heads: int, n_kv_heads: int, title: str, color="C0") -> None:
    """A bipartite diagram: query heads on top, KV heads below, one line per read,
    drawn from `head_map` (i.e. from repeat_kv itself)."""
    reads = head_map(n_heads, n_kv_heads)
    xq = [h for h in range(n_heads)]
    # centre each KV head under the query heads that read it
    xk = [sum(h for h in xq if reads[h] == j) / reads.count(j) for j in range(n_kv_heads)]
    for h, j in enumerate(reads):
        ax.plot([xq[h], xk[j]], [1, 0], color=color, lw=1.6, zorder=1)
    ax.scatter(xq, [1] * n_heads, s=420, color="white", edgecolor="black", zorder=2)
    ax.scatter(xk, [0] * n_kv_heads, s=420, color=color, edgecolor="black", zorder=2)
    for h in range(n_heads):
        ax.text(xq[h], 1, f"q{h}", ha="center", va="center", fontsize=9, zorder=3)
    for j in range(n_kv_heads):
        ax.text(xk[j], 0, f"kv{j}", ha="center", va="center", fontsize=8, color="white",
                fontweight="bold", zorder=3)
    ax.set_xlim(-0.6, n_heads - 0.4)
    ax.set_ylim(-0.4, 1.4)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["KV heads", "query heads"])
    ax.set_xticks([])
    ax.tick_params(length=0)
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(title)


def projection_table(layouts=LAYOUTS, bytes_per_value: int = 2) -> pd.DataFrame:
    """Per layout, counted on the built models: KV heads, query heads per KV head, the
    K and V projection shapes, attention parameters per layer, the model's parameters,
    and the fp16 KV-cache bytes per generated token (all layers, K and V, batch 1)."""
    rows = []
    for variant, name in layouts:
        cfg = variant_config(variant)
        model = TinyLlama(cfg, seed=None)
        attn = model.layers[0].self_attn
        rows.append({
            "layout": name, "variant": variant, "KV heads": cfg.n_kv_heads,
            "query heads per KV head": cfg.n_rep,
            "k_proj": "×".join(str(s) for s in attn.k_proj.weight.shape),
            "v_proj": "×".join(str(s) for s in attn.v_proj.weight.shape),
            "K+V parameters per layer": attn.k_proj.weight.numel() + attn.v_proj.weight.numel(),
            "attention parameters per layer": sum(p.numel() for p in attn.parameters()),
            "model parameters": model.num_parameters(),
            "KV-cache bytes per token (fp16)": kv_cache_bytes(
                cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 1, bytes_per_value=bytes_per_value),
        })
    return pd.DataFrame(rows).set_index("layout")


def head_map_table(n_heads: int = REFERENCE.n_heads, layouts=LAYOUTS) -> pd.DataFrame:
    """Rows: layouts; columns: query heads; cells: the KV head each query head reads."""
    rows = {name: head_map(n_heads, variant_config(v).n_kv_heads) for v, name in layouts}
    table = pd.DataFrame(rows, index=[f"q{h}" for h in range(n_heads)]).T
    table.index.name = "layout"
    return table
