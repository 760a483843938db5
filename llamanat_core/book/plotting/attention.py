"""The attention figures: `attention_heatmap`, `attention_grid`, `position_heatmap`, and the
task summaries `recall_attention_figure`, `recall_items_figure`, `recall_by_pair_figure`,
`addition_attention_figure`. They draw what `llamanat_core.book.mechanism` returns, on the
sequential `HEAT_CMAP` with token names on the axes and a colour bar. `head_map_figure`
draws which KV head each query head reads (`helpers.gqa.head_maps`); `row_gradient_figure`
which rows of a learned position table one training batch reaches; `score_map_figure` a
query-by-key score matrix on a diverging scale; `angle_wheel_figure` RoPE's angle per pair and
position, modulo 360°, one panel per base; `lookup_figure` each run's attention on the queried
value against its accuracy.
"""
from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ...data.tasks import TRAIN_PAIRS
from ..mechanism import ADDITION_SOURCES, CHAIN, RECALL_ROLES
from .seeds import chance_line, legend_outside
from .style import CHANCE_COLOR, FIGSIZE, PALETTE, VARIANT_COLORS, VERMILION, use_book_style, variant_color

# ---------------------------------------------------------------- attention maps

HEAT_CMAP = "cividis"  # sequential, built to read the same under colour-vision deficiencies
MAP_LABEL = "attention weight"


def _heat_cmap():
    return matplotlib.colormaps[HEAT_CMAP].with_extremes(bad="white")  # masked cells: blank


def _label_map(ax, im, xlabels, ylabels, xlabel: str, ylabel: str, title, colorbar: bool,
               sizes=(7, 7), fraction: float = 0.046):
    """Token names on both axes of a heatmap, its axis labels, title and colour bar."""
    ax.set_xticks(np.arange(len(xlabels)))
    ax.set_xticklabels(xlabels, rotation=90, fontsize=sizes[0])
    ax.set_yticks(np.arange(len(ylabels)))
    ax.set_yticklabels(ylabels, fontsize=sizes[1])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    if title:
        ax.set_title(title, fontsize=9)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=MAP_LABEL, fraction=fraction, pad=0.02)
    return im


def attention_heatmap(ax, weights, tokens, query_tokens=None, title: str | None = None,
                      vmax: float = 1.0, colorbar: bool = True):
    """One attention map: rows are queries, columns the keys they read, both labelled
    with token names; what a query cannot see (later positions) is left blank.

    `weights` is (T, T), or (Tq, T) for the last Tq queries with `query_tokens` naming
    them (e.g. only the answer position). Returns the image, for a shared colour bar."""
    w = np.asarray(weights, dtype=float)
    rows = list(tokens) if query_tokens is None else list(query_tokens)
    if w.shape != (len(rows), len(tokens)):
        raise ValueError(f"weights of shape {w.shape} do not match {len(rows)} query and "
                         f"{len(tokens)} key labels")
    future = np.triu(np.ones(w.shape, dtype=bool), k=1 + len(tokens) - len(rows))  # (Tq, T)
    im = ax.imshow(np.ma.masked_array(w, future), cmap=_heat_cmap(), vmin=0.0, vmax=vmax,
                   aspect="auto", interpolation="nearest")
    return _label_map(ax, im, tokens, rows, "key (position read)", "query (position reading)",
                      title, colorbar, sizes=(7, 7), fraction=0.046)


def attention_grid(maps, tokens, title: str | None = None):
    """Every layer and head of one item (`maps` (L, H, T, T), from
    `mechanism.item_attention`): one row of heatmaps per layer, one colour bar."""
    use_book_style()
    maps = np.asarray(maps, dtype=float)
    n_layers, n_heads, t, _ = maps.shape
    side = max(2.3, 0.16 * t)  # inches per panel: room for one label per token
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(side * n_heads + 1.0, side * n_layers + 0.8),
                             squeeze=False, sharex=True, sharey=True)
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            im = attention_heatmap(ax, maps[layer, head], tokens,
                                   title=f"layer {layer + 1} head {head + 1}", colorbar=False)
            ax.label_outer()  # axis labels on the outer panels only
    fig.colorbar(im, ax=axes, label=MAP_LABEL, fraction=0.025, pad=0.02)
    if title:
        fig.suptitle(title)
    return fig


def position_heatmap(ax, frame, title: str | None = None, mark=("queried key", "queried value"),
                     colorbar: bool = True):
    """One query's attention over the positions of one item, every layer and head a row:
    `frame` is `mechanism.recall_item` (columns: position, token, role). Tokens whose role
    is in `mark` get a coloured, bold label (the pair asked about)."""
    w = frame.to_numpy(dtype=float)  # (L*H, T)
    im = ax.imshow(w, cmap=_heat_cmap(), vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    _label_map(ax, im, frame.columns.get_level_values("token"),
               [f"L{layer} H{head}" for layer, head in frame.index],
               "position read (the pair asked about in bold)", "layer, head", title, colorbar,
               sizes=(7.5, 8), fraction=0.03)
    for label, role in zip(ax.get_xticklabels(), frame.columns.get_level_values("role")):
        if role in mark:
            label.set_color(VERMILION)
            label.set_fontweight("bold")
    return im


def text_window_figure(maps: dict, chars: str):
    """Several text models on one window: one row per model (`maps` label -> (L, H, T, T),
    `mechanism.attention_weights` of one window), one column per layer, each panel the
    mean over the layer's heads; `chars` the window's characters, one per position."""
    use_book_style()
    labels = [repr(c)[1:-1] if c.isspace() else c for c in chars]  # a newline shows as \n
    n_layers = next(iter(maps.values())).shape[0]
    fig, axes = plt.subplots(len(maps), n_layers, squeeze=False, sharex=True, sharey=True,
                             figsize=(FIGSIZE[0], 3.2 * len(maps) + 0.4), layout="constrained")
    for r, (label, m) in enumerate(maps.items()):
        for layer in range(n_layers):
            im = attention_heatmap(axes[r, layer], np.asarray(m[layer], dtype=float).mean(0), labels,
                                   title=f"{label}, layer {layer + 1} (mean of heads)", colorbar=False)
            axes[r, layer].label_outer()
    fig.colorbar(im, ax=axes, label=MAP_LABEL, fraction=0.025, pad=0.02)
    return fig


def recall_items_figure(frames: dict, title: str | None = None):
    """`mechanism.recall_item` of several models on the same item, one panel each, stacked:
    every layer and head's attention from the answer position over the item's positions,
    the pair asked about in bold. `frames` maps a label to a frame."""
    use_book_style()
    n_rows = sum(len(f) for f in frames.values())
    fig, axes = plt.subplots(len(frames), 1, squeeze=False, sharex=True,
                             figsize=(FIGSIZE[0], 0.9 + 0.32 * n_rows + 0.5 * len(frames)))
    for ax, (label, frame) in zip(axes[:, 0], frames.items()):
        position_heatmap(ax, frame, title=label, colorbar=False)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    im = axes[-1, 0].images[0]
    fig.colorbar(im, ax=axes[:, 0], label="attention", fraction=0.03, pad=0.02)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _mass_panel(ax, values, title: str, title_size: float, xlabels, rotation: float, ylabels,
                label_size: float):
    """One heat panel of attention mass in [0, 1]: rows `ylabels`, columns `xlabels`."""
    im = ax.imshow(values, cmap=_heat_cmap(), vmin=0.0, vmax=1.0, aspect="auto",
                   interpolation="nearest")
    ax.grid(False)
    ax.set_title(title, fontsize=title_size)
    ax.set_xticks(np.arange(len(xlabels)))
    ax.set_xticklabels(xlabels, rotation=rotation, ha="right", fontsize=label_size)
    ax.set_yticks(np.arange(len(ylabels)))
    ax.set_yticklabels(ylabels, fontsize=label_size)
    return im


def recall_attention_figure(summaries: dict, value: str = "mass"):
    """The recall summary (`mechanism.recall_attention`) as heatmaps: one row per model,
    one column per list length; in each, every layer and head (rows) against the roles
    the answer position reads (columns). `summaries` maps a label to a frame."""
    use_book_style()
    lengths = sorted({int(n) for df in summaries.values() for n in df.n_pairs})
    fig, axes = plt.subplots(len(summaries), len(lengths), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.6 * len(lengths) + 1.6, 2.6 * len(summaries) + 0.6))
    for r, (label, df) in enumerate(summaries.items()):
        for c, n in enumerate(lengths):
            ax = axes[r, c]
            d = df[df.n_pairs == n].pivot_table(index=["layer", "head"], columns="role", values=value)
            d = d[list(RECALL_ROLES)]  # (L*H, roles)
            im = _mass_panel(ax, d.to_numpy(), f"{label}: {n} pairs", 9, RECALL_ROLES, 45,
                             [f"L{layer} H{head}" for layer, head in d.index], 8)
        axes[r, 0].set_ylabel("layer, head")
    fig.colorbar(im, ax=axes, label="attention mass from the answer position", fraction=0.03, pad=0.02)
    return fig


def recall_by_pair_figure(ax, summaries: dict, layer: int, train_pairs: int = TRAIN_PAIRS,
                          colors: dict | None = None):
    """Mass on the queried value against which pair was asked about (`mechanism.recall_by_pair`),
    the mean of the layer's heads, one line per label; the training length is marked and
    the dotted floor is what a uniform head would give one position."""
    for i, (label, df) in enumerate(summaries.items()):
        d = df[df.layer == layer].groupby("pair").mass.mean()
        color = (colors or {}).get(label) or VARIANT_COLORS.get(str(label).split()[0]) or PALETTE[i]
        ax.plot(d.index, d.values, color=color, marker="o", ms=4, label=str(label))
    n = max(int(df.n_pairs.max()) for df in summaries.values())
    ax.axvline(train_pairs + 0.5, color=CHANCE_COLOR, lw=0.9, ls="--")
    ax.annotate("training length", xy=(train_pairs + 0.5, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -2), textcoords="offset points", ha="left", va="top", fontsize=7.5,
                color=CHANCE_COLOR)
    uniform = 1 / (3 * n + 1)  # one position's share of a uniform row at this length
    ax.axhline(uniform, color=CHANCE_COLOR, lw=0.9, ls=":")
    ax.set_xticks(np.arange(1, n + 1))
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("queried pair (1 = first in the list)")
    ax.set_ylabel(f"mass on the queried value\n(layer {layer}, mean of heads)")
    legend_outside(ax, fontsize=8)
    return ax


def addition_attention_figure(summaries: dict, layers=None):
    """The addition summary (`mechanism.addition_attention`) as heatmaps: one row per
    (model, layer), one column per head; in each, the chain token being predicted (rows)
    against the operand digit read (columns), "other" being every other position."""
    use_book_style()
    first = next(iter(summaries.values()))
    layers = sorted(set(first.layer)) if layers is None else list(layers)
    heads = sorted(set(first["head"]))
    rows = [(label, layer) for label in summaries for layer in layers]
    fig, axes = plt.subplots(len(rows), len(heads), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.1 * len(heads) + 1.8, 2.0 * len(rows) + 0.9))
    for r, (label, layer) in enumerate(rows):
        df = summaries[label]
        for c, head in enumerate(heads):
            ax = axes[r, c]
            d = df[(df.layer == layer) & (df["head"] == head)].pivot(
                index="target", columns="source", values="mass").loc[list(CHAIN), list(ADDITION_SOURCES)]
            im = _mass_panel(ax, d.to_numpy(), f"{label}: L{layer} H{head}", 8, ADDITION_SOURCES, 60,
                             CHAIN, 7.5)
        axes[r, 0].set_ylabel("predicting")
    for ax in axes[-1]:
        ax.set_xlabel("operand digit read")
    fig.colorbar(im, ax=axes, label="attention mass", fraction=0.03, pad=0.02)
    return fig


# ---------------------------------------------------------------- which KV head a query head reads

def head_map_axes(ax, reads: list[int], title: str, color="C0") -> None:
    """A bipartite diagram: query heads on top, KV heads below, one line per read;
    `reads[h]` is the KV head query head h reads (`helpers.gqa.head_map`)."""
    n_heads, n_kv_heads = len(reads), max(reads) + 1
    xq = list(range(n_heads))
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


def head_map_figure(maps: dict[str, tuple[str, list[int]]]):
    """One `head_map_axes` panel per layout, side by side, in the variant's colour;
    `maps` is variant -> (layout name, reads), as `helpers.gqa.head_maps` returns it."""
    use_book_style()
    fig, axes = plt.subplots(1, len(maps), figsize=(10, 2.8), squeeze=False)
    for ax, (variant, (name, reads)) in zip(axes[0], maps.items()):
        k = max(reads) + 1
        head_map_axes(ax, reads, f"{name}: {k} KV head{'s' if k > 1 else ''} ({variant})",
                      color=variant_color(variant))
    fig.tight_layout()
    return fig


def row_gradient_figure(grad_row_norm, marks: dict[str, int], title: str | None = None):
    """A learned position table's gradient norm per row (= position) after one training
    batch, as bars, with a dashed line before each position of `marks` (label -> first
    position past it, e.g. the trained length and the longer lists' prompt lengths)."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar(range(len(grad_row_norm)), grad_row_norm, color=variant_color("abs_pos"))
    for text, pos in marks.items():
        ax.axvline(pos - 0.5, color="0.4", lw=0.9, ls="--")
        ax.text(pos - 0.2, ax.get_ylim()[1] * 0.92, text, fontsize=8, color="0.3")
    ax.set(xlabel="row of the position table (= position)", ylabel="gradient norm of the row (clipped)",
           title=title)
    fig.tight_layout()
    return fig


def score_map_figure(scores, title: str = "q · k after rotation", tick_every: int = 3):
    """A (query position, key position) matrix of attention scores on a diverging scale
    centred on zero (red above, blue below), so stripes along the diagonals, where only
    the offset m − n matters, show as bands of one colour."""
    scores = np.asarray(scores)  # (M, N)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    lim = float(np.abs(scores).max())
    im = ax.imshow(scores, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set(xlabel="key position n", ylabel="query position m", title=title,
           xticks=range(0, scores.shape[1], tick_every), yticks=range(0, scores.shape[0], tick_every))
    ax.grid(False)
    fig.colorbar(im, ax=ax, shrink=0.85, label="score")
    fig.tight_layout()
    return fig


def angle_wheel_figure(angles: dict, read_at=(12, 24, 36)):
    """Every pair's rotation angle at every position, modulo 360° on a colour wheel: one panel
    per entry of `angles` (title → radians of shape (position, pair), as `helpers.sweep.pair_angles`
    returns them). A row that runs through the wheel several times is a fast pair, a row of one
    colour a pair that does not move; dashed lines mark the positions `read_at`."""
    fig, axes = plt.subplots(1, len(angles), figsize=(10, 2.9), sharey=True, layout="constrained")
    axes = np.atleast_1d(axes)
    n_pairs = 0
    for ax, (title, radians) in zip(axes, angles.items()):
        degrees = np.degrees(np.asarray(radians)) % 360  # (position, pair)
        n_pairs = degrees.shape[1]
        im = ax.imshow(degrees.T, cmap="twilight", vmin=0, vmax=360, aspect="auto", origin="lower",
                       interpolation="nearest")
        for position in read_at:
            ax.axvline(position, color="black", lw=0.8, ls="--")
        ax.set_title(title)
        ax.set_xlabel("position")
        ax.grid(False)
    axes[0].set_ylabel("channel pair i")
    axes[0].set_yticks(range(n_pairs))
    fig.colorbar(im, ax=axes, label="angle mod 360 (degrees)", ticks=[0, 90, 180, 270, 360])
    return fig


def lookup_figure(lookup, variants, colors: dict[str, str], step: int, chance: float):
    """Each replayed run as one point: its strongest head's attention mass on the queried value
    against its test accuracy, both in percent, one panel per variant in `variants`, one colour
    and marker per answer formulation ("name" circles, "copy" squares), with the chance floor
    `chance`. `lookup` has one row per run: variant, answer, "queried value" and accuracy;
    `chance` and the last two are fractions."""
    fig, axes = plt.subplots(1, len(variants), figsize=(9, 3.4), sharey=True)
    for ax, variant in zip(axes, variants):
        for answer, marker in (("name", "o"), ("copy", "s")):
            g = lookup[(lookup.variant == variant) & (lookup.answer == answer)]
            ax.scatter(100 * g["queried value"], 100 * g.accuracy, color=colors[answer], marker=marker,
                       s=26, alpha=0.85, label=answer)
        chance_line(ax, chance)
        ax.set(xlim=(-3, 103), ylim=(-3, 103), xlabel="strongest head's mass on the queried value (%)",
               title=f"{variant}, at step {step:,}")
    axes[0].set_ylabel("test accuracy (%)")
    legend_outside(axes[-1], title="answer")
    fig.tight_layout()
    return fig
