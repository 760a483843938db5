"""The GQA chapter's measurements: which query head reads which KV head, and what the
KV heads cost.

Everything here calls the package's own `repeat_kv`, so the figure
(`plotting.head_map_figure`) and the check show what the model actually does, not a
re-drawing of it.
"""
from __future__ import annotations

import pandas as pd
import torch

from ...model.blocks import repeat_kv
from ...model.config import REFERENCE, variant_config
from ...model.model import TinyLlama
from ...model.published import kv_cache_bytes

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


def expansion_checks(expansions: dict, layouts=LAYOUTS) -> pd.DataFrame:
    """`check_repeat_kv` of each expansion (name -> fn(x, n_rep)) in each layout: one row
    per layout (its name, index `layout`) with its n_rep and one column per expansion."""
    rows = []
    for v, name in layouts:
        cfg = variant_config(v)
        checks = {label: check_repeat_kv(cfg.n_heads, cfg.n_kv_heads, fn=fn)
                  for label, fn in expansions.items()}
        rows.append({"layout": name, "n_rep": cfg.n_heads // cfg.n_kv_heads, **checks})
    return pd.DataFrame(rows).set_index("layout")


def head_maps(layouts=LAYOUTS) -> dict[str, tuple[str, list[int]]]:
    """variant -> (layout name, `head_map` of its config): what `plotting.head_map_figure`
    draws."""
    return {v: (name, head_map(variant_config(v).n_heads, variant_config(v).n_kv_heads))
            for v, name in layouts}


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
