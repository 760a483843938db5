"""The KV-cache figures: the bytes a cache holds against the context length, one row per model
shape and one panel per attention layout against MHA (`cache_size_figure`), and the time per
generated token with and without the cache, beside slope-1 and slope-2 guides (`timing_figure`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...model.published import kv_cache_bytes
from ..helpers.kv_cache import human_bytes
from .seeds import legend_outside
from .style import BLUE, VERMILION, plain_ticks, variant_color

CONTEXTS = 2 ** np.arange(7, 16)  # 128 .. 32,768 positions


def cache_size_figure(shapes, names: dict[str, str], contexts=CONTEXTS):
    """The fp16 KV cache of batch 1 against the context length, on log axes (equal factors are
    equal steps). `shapes` holds one row each: (title, layers, head_dim, KV heads per layout,
    the context to mark with a dotted line); each row sets GQA, then MQA, against MHA (dashed).
    `names` gives each layout's printed name ("mha" → "MHA")."""
    fig = plt.figure(figsize=(10, 6.6), layout="constrained")
    for sub, (title, layers, head_dim, kv_heads, mark) in zip(fig.subfigures(2, 1), shapes):
        axes = sub.subplots(1, 2, sharey=True)
        for ax, v in zip(axes, ("llama", "mqa")):  # each layout against MHA, one KV head per query head
            for u, ls in (("mha", "--"), (v, "-")):
                h = kv_heads[u]
                y = [kv_cache_bytes(layers, h, head_dim, int(n)) for n in contexts]
                ax.plot(contexts, y, marker="o", ms=3.5, ls=ls, color=variant_color(u),
                        label=f"{names[u]}: {h} KV head{'s' if h > 1 else ''}")
            ax.axvline(mark, color="0.5", lw=0.9, ls=":")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xticks(contexts[::2], [f"{n:,}" for n in contexts[::2]])
            ax.set_xlabel("context length (positions)")
            ax.set_title(f"{names[v]} against MHA", fontsize=10)
            ax.legend(loc="upper left", fontsize=8)  # the lines rise to the right: the corner is empty
        lo, hi = axes[0].get_ylim()  # shared by the row: ticks once both panels are drawn
        ticks = [2 ** k for k in range(10, 41, 2) if lo <= 2 ** k <= hi]
        axes[0].set_yticks(ticks, [human_bytes(t) for t in ticks])
        axes[0].set_ylabel("KV cache, fp16, batch 1")
        sub.suptitle(title, fontsize=10.5, fontweight="bold")
    return fig


def timing_figure(lengths, full_ms, cached_ms):
    """The median time per generated token against the sequence length, recomputing every
    position and with the KV cache, on log axes; the dotted grey guides have slopes 1 and 2
    and pass through the last recomputed point."""
    full_ms, cached_ms = np.asarray(full_ms), np.asarray(cached_ms)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.plot(lengths, full_ms, marker="o", color=VERMILION, label="recomputing every position")
    ax.plot(lengths, cached_ms, marker="o", color=BLUE, label="with the KV cache")
    x = np.array(lengths, dtype=float)
    for power, style in ((1, (0, (1, 2))), (2, (0, (4, 2)))):
        ax.plot(x, full_ms[-1] * (x / x[-1]) ** power, color="0.6", lw=0.9, ls=style,
                label=f"slope {power} guide")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [f"{n:,}" for n in lengths])
    ax.set_ylim(min(cached_ms.min(), full_ms.min()) / 2, full_ms.max() * 2)
    plain_ticks(ax, "y")  # 0.5, 1, 2, 5 ms rather than 10⁰
    ax.set_xlabel("sequence length before the new token")
    ax.set_ylabel("ms per generated token")
    ax.set_title("time per generated token (median)")
    legend_outside(ax, fontsize=8)
    fig.tight_layout()
    return fig
