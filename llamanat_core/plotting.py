"""Every figure of the book: one look, the shared figure functions, deterministic PNGs.

Every chapter starts with ``use_book_style()`` and ends each figure with ``show(fig)``.
The same figure drawn twice gives byte-identical PNG bytes: Agg rendering, a fixed
dpi, a fixed SVG hash salt, and no "Software"/date metadata in the file, so an
executed notebook does not change when it is executed again.

Colours are fixed per variant (``VARIANT_COLORS``) and per task (``TASK_COLORS``), so
``llama`` is the same colour in every chapter. They come from the Okabe-Ito palette,
which stays distinguishable under the common colour-vision deficiencies; rows that share
a figure get colours far apart (never two blues side by side).

The figure functions (`seed_points`, `seed_curves`, `summary_figure`) take seed tables
and tidy frames from `llamanat_core.report`; every accuracy figure draws its chance
floor (`chance_line`), and seeds shared by several rows are joined by thin lines, so a
reader sees which seed moved which way.

The attention figures (`attention_heatmap`, `attention_grid`, `position_heatmap`, and the
task summaries `recall_attention_figure`, `recall_by_pair_figure`,
`addition_attention_figure`) draw what `llamanat_core.mechanism` returns, on the
sequential `HEAT_CMAP` with token names on the axes and a colour bar.
"""
from __future__ import annotations

import math
import sys
import warnings

import matplotlib
import matplotlib.ticker
import numpy as np

DPI = 110  # pixels per inch of every PNG in the book
FIGSIZE = (7.0, 3.6)  # inches: a full-width figure at the book's text width
PNG_METADATA = {"Software": None}  # no matplotlib version string in the file
PRINT_KWARGS = {"bbox_inches": "tight", "metadata": PNG_METADATA}

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
NEUTRAL = "#7f7f7f"

BLUE, ORANGE, SKY, GREEN, VERMILLION, PURPLE, BLACK = (
    "#0072B2", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#CC79A7", "#000000")

# The rows a chapter draws together get colours far apart: norm (llama, layernorm,
# postnorm), RoPE (llama, abs_pos), SwiGLU (llama, gelu_mlp), GQA (llama, mha, mqa),
# the answer alphabet (llama, untied). Across chapters a variant keeps its colour.
VARIANT_COLORS = {
    "llama": BLUE,
    "layernorm": ORANGE,
    "postnorm": PURPLE,
    "abs_pos": VERMILLION,
    "gelu_mlp": GREEN,
    "mha": ORANGE,
    "mqa": BLACK,
    "untied": VERMILLION,
    "bias": GREEN,
}
# Groups of variants that share a figure (tested: no two of a group share a colour).
FIGURE_GROUPS = (("llama", "layernorm", "postnorm"), ("llama", "abs_pos"), ("llama", "gelu_mlp"),
                 ("llama", "mha", "mqa"), ("llama", "untied"), ("llama", "bias"))
TASK_COLORS = {"addition": BLUE, "recall": VERMILLION}
CHANCE_COLOR = "#555555"

STYLE = {
    "figure.figsize": FIGSIZE,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e0e0e0",
    "grid.linewidth": 0.8,
    "axes.prop_cycle": matplotlib.cycler(color=list(PALETTE)),
    "legend.frameon": False,
    "legend.fontsize": 9,
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
    "svg.hashsalt": "llamanat",  # SVG ids stay fixed if anyone ever renders SVG
    "svg.fonttype": "path",
    "path.simplify": True,
}


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def use_book_style() -> None:
    """Apply the book's matplotlib style; inside a kernel, make inline figures PNG-only
    with fixed dpi and no metadata, and silence tqdm's missing-widgets notice.
    Safe to call more than once."""
    if not _in_kernel():
        matplotlib.use("Agg")  # scripts and tests: never open a window
    matplotlib.rcParams.update(STYLE)
    # The book renders notebooks without ipywidgets; tqdm's notice about that (raised when
    # transformers or a progress bar imports tqdm.auto) would otherwise land in the page.
    warnings.filterwarnings("ignore", message="IProgress not found")
    if _in_kernel():
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png", **PRINT_KWARGS)


def variant_color(name: str) -> str:
    """The book's colour for a variant (a neutral grey for anything unlisted)."""
    return VARIANT_COLORS.get(name, NEUTRAL)


def png_bytes(fig) -> bytes:
    """The exact PNG the book shows for `fig` (for tests and for byte comparisons)."""
    from io import BytesIO

    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor=fig.get_facecolor(), **PRINT_KWARGS)
    return buf.getvalue()


def show(fig) -> None:
    """Display `fig` once as an inline PNG and close it (no duplicate at the cell's end)."""
    import matplotlib.pyplot as plt

    if _in_kernel():
        from IPython.display import Image, display

        display(Image(data=png_bytes(fig), format="png"))
    plt.close(fig)


def _label(index) -> str:
    return " / ".join(str(i) for i in index) if isinstance(index, tuple) else str(index)


def chance_line(ax, chance: float, percent: bool = True, label: bool = True):
    """The chance floor of an accuracy axis: a dotted line, labelled 'chance 1/4' at the
    right edge (inside the axes, above the line)."""
    from .report import chance_label

    y = 100 * chance if percent else chance
    ax.axhline(y, color=CHANCE_COLOR, lw=0.9, ls=":", zorder=1)
    if label:
        ax.annotate(f"chance {chance_label(chance)}", xy=(1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=7.5, color=CHANCE_COLOR)
    return ax


def seed_points(ax, table, percent: bool = True, color=BLUE, label_rotation=0,
                offset: float = 0.0, label: str | None = None, paired: bool = True,
                chance: float | None = None):
    """Each seed as a point, the mean as a bar, one x position per row of a seed_table.

    paired=True joins one seed's points across the rows with a thin line (the rows of a
    table share seeds: same data, same initial weights), so a reader sees each seed's
    own direction. `chance` draws the chance floor."""
    scale = 100 if percent else 1
    seed_cols = [c for c in table.columns if c.startswith("seed ")]
    x = np.arange(len(table)) + offset
    jitter = np.linspace(-0.12, 0.12, len(seed_cols)) if len(seed_cols) > 1 else np.zeros(1)
    vals = table[seed_cols].to_numpy(dtype=float) * scale  # (rows, seeds)
    if paired and len(table) > 1:
        for k in range(len(seed_cols)):
            ax.plot(x + jitter[k], vals[:, k], color=color, lw=0.7, alpha=0.35, zorder=2)
    for i in range(len(table)):
        ax.scatter(x[i] + jitter, vals[i], s=18, color=color, alpha=0.8, zorder=3,
                   label=label if i == 0 else None)
        ax.hlines(table["mean"].iloc[i] * scale, x[i] - 0.22, x[i] + 0.22, color=color, lw=2.2, zorder=4)
    ax.set_xticks(np.arange(len(table)))
    ax.set_xticklabels([_label(i) for i in table.index], rotation=label_rotation)
    if percent:
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-3, 103)
    if chance is not None:
        chance_line(ax, chance, percent)
    return ax


def legend_outside(ax, **kwargs):
    """A legend to the right of the axes, where it covers no data."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def seed_curves(ax, df, by: str, value: str = "test_acc", order=None,
                percent: bool = True, x: str = "step", colors: dict | None = None,
                chance: float | None = None, legend: bool = True):
    """A metric against training step: one thin line per seed, a thick line for the mean.

    `x` names another column to plot against (e.g. a depth or a length); `colors` maps a
    group to its colour (default: the variant's colour, else the style's cycle, in
    `order`); `chance` draws the chance floor; the legend sits outside the axes."""
    from .report import METRIC_NAMES

    scale = 100 if percent else 1
    groups = order or list(dict.fromkeys(df[by]))
    for i, g in enumerate(groups):
        d = df[df[by] == g]
        color = (colors or {}).get(g) or VARIANT_COLORS.get(g) or PALETTE[i % len(PALETTE)]
        for _, s in d.groupby("seed"):
            s = s.sort_values(x)
            ax.plot(s[x], s[value] * scale, color=color, lw=0.8, alpha=0.45)
        m = d.groupby(x)[value].mean() * scale
        ax.plot(m.index, m.values, color=color, lw=2.2, marker="o", ms=4, label=str(g))
    ax.set_xlabel("training step" if x == "step" else x)
    ax.set_ylabel(METRIC_NAMES.get(value, value) + (" (%)" if percent else ""))
    if chance is not None:
        chance_line(ax, chance, percent)
    if legend:
        legend_outside(ax, fontsize=8)
    return ax


def summary_figure(df):
    """The intro's one-screen summary: accuracy at the last checkpoint per variant and task,
    every seed a point, the chance floor and the reference's mean drawn. (The chapters
    join paired seeds; here each control pairs with `llama`, not with its neighbour.)"""
    import matplotlib.pyplot as plt

    from .config import MATRIX_VARIANTS
    from .report import chance, seed_table

    use_book_style()
    d = df[df.measurement == "matrix"]
    present = set(d.variant)
    variants = [v for v in MATRIX_VARIANTS if v in present] + sorted(present - set(MATRIX_VARIANTS))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, task in zip(axes, ("addition", "recall")):
        t = seed_table(d[d.task == task], "variant", "test_acc", order=variants)
        # seven rows side by side: joining neighbours would pair rows that are not compared
        seed_points(ax, t, color=TASK_COLORS[task], label_rotation=30, chance=chance(task), paired=False)
        ax.set_title(f"{task}: test accuracy at the last checkpoint")
        ax.axhline(100 * t.loc["llama", "mean"], color="0.6", lw=0.8, ls="--")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- time to solve and losses


def km_axes(ax, runs, variants, task: str, regime: str, cap: float | None = None,
            labels: dict | None = None, band: bool = True):
    """Kaplan–Meier curves on one axis: the fraction of seeds solved by each step (one
    step curve per variant, its 95 % band shaded), a tick where a seed stopped unsolved
    (censored at the cap). `runs` is `comparisons.runs(results)`."""
    from .comparisons import variant_rows

    groups, colors = {}, {}
    for v in variants:
        label = (labels or {}).get(v, v)
        groups[label] = variant_rows(runs, v, task, regime)
        colors[label] = variant_color(v)
    return km_groups_axes(ax, groups, colors=colors, cap=cap, band=band)


def km_figure(runs, variants, task: str, regimes=("finite", "fresh"), cap: float | None = None,
              labels: dict | None = None):
    """Time to solve, one panel per data regime: Kaplan–Meier curves of `variants`."""
    import matplotlib.pyplot as plt

    use_book_style()
    fig, axes = plt.subplots(1, len(regimes), figsize=(4.2 * len(regimes) + 1.6, 3.4),
                             sharey=True, squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        km_axes(ax, runs, variants, task, regime, cap=cap, labels=labels)
        ax.set_title(f"{task}, {regime} data")
        ax.legend(loc="upper left", fontsize=8, title="solved by the cap", title_fontsize=8)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


def loss_curves_axes(ax, curves, seeds=None, solved_color=BLUE, unsolved_color=VERMILLION,
                     log: bool = True, legend: bool = True):
    """Training (solid) and validation (dashed) loss of each run in `curves` (one variant,
    task and regime), solved runs in one colour, unsolved in another: a gap opening
    between the two lines is memorisation; both flat together is a plateau."""
    if seeds is not None:
        curves = curves[curves.seed.isin(seeds)]
    for (_seed, censored), g in curves.groupby(["seed", "censored"], sort=True):
        g = g.sort_values("step")
        color = unsolved_color if censored else solved_color
        ax.plot(g.step, g.train_loss, color=color, lw=1.1, alpha=0.85)
        ax.plot(g.step, g.val_loss, color=color, lw=1.1, ls="--", alpha=0.85)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats)")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: f"{t:,.0f}"))
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=solved_color, lw=1.5, label="solved seeds"),
               Line2D([], [], color=unsolved_color, lw=1.5, label="unsolved seeds"),
               Line2D([], [], color="0.3", lw=1.1, label="training"),
               Line2D([], [], color="0.3", lw=1.1, ls="--", label="validation")]
    if legend:
        legend_outside(ax, handles=handles, fontsize=8)
    return ax


def loss_figure(curves, variant: str, task: str, regimes=("finite", "fresh"), hline: float | None = None,
                hline_label: str | None = None):
    """Training vs validation loss of every seed of one variant and task, a panel per regime."""
    import matplotlib.pyplot as plt

    from .comparisons import variant_rows

    use_book_style()
    fig, axes = plt.subplots(1, len(regimes), figsize=(4.2 * len(regimes) + 0.6, 3.4),
                             sharey=True, squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        g = variant_rows(curves, variant, task, regime)
        if g.empty:
            raise ValueError(f"no curves for {variant} on {task} in the {regime} regime")
        loss_curves_axes(ax, g, legend=ax is axes[0][-1])
        if hline is not None:
            ax.axhline(hline, color=CHANCE_COLOR, lw=0.9, ls=":")
            if hline_label:
                ax.annotate(hline_label, xy=(1.0, hline), xycoords=("axes fraction", "data"),
                            xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                            fontsize=7.5, color=CHANCE_COLOR)
        ax.set_title(f"{variant}, {task}, {regime} data")
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


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
    import matplotlib.pyplot as plt

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
            label.set_color(VERMILLION)
            label.set_fontweight("bold")
    return im


def recall_attention_figure(summaries: dict, value: str = "mass"):
    """The recall summary (`mechanism.recall_attention`) as heatmaps: one row per model,
    one column per list length; in each, every layer and head (rows) against the roles
    the answer position reads (columns). `summaries` maps a label to a frame."""
    import matplotlib.pyplot as plt

    from .mechanism import RECALL_ROLES

    use_book_style()
    lengths = sorted({int(n) for df in summaries.values() for n in df.n_pairs})
    fig, axes = plt.subplots(len(summaries), len(lengths), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.6 * len(lengths) + 1.6, 2.6 * len(summaries) + 0.6))
    for r, (label, df) in enumerate(summaries.items()):
        for c, n in enumerate(lengths):
            ax = axes[r, c]
            d = df[df.n_pairs == n].pivot_table(index=["layer", "head"], columns="role", values=value)
            d = d[list(RECALL_ROLES)]  # (L*H, roles)
            im = ax.imshow(d.to_numpy(), cmap=_heat_cmap(), vmin=0.0, vmax=1.0, aspect="auto",
                           interpolation="nearest")
            ax.grid(False)
            ax.set_title(f"{label}: {n} pairs", fontsize=9)
            ax.set_xticks(np.arange(len(RECALL_ROLES)))
            ax.set_xticklabels(RECALL_ROLES, rotation=45, ha="right", fontsize=8)
            ax.set_yticks(np.arange(len(d)))
            ax.set_yticklabels([f"L{layer} H{head}" for layer, head in d.index], fontsize=8)
        axes[r, 0].set_ylabel("layer, head")
    fig.colorbar(im, ax=axes, label="attention mass from the answer position", fraction=0.03, pad=0.02)
    return fig


def recall_by_pair_figure(ax, summaries: dict, layer: int, train_pairs: int = 4,
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
    import matplotlib.pyplot as plt

    from .mechanism import ADDITION_SOURCES, CHAIN

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
            im = ax.imshow(d.to_numpy(), cmap=_heat_cmap(), vmin=0.0, vmax=1.0, aspect="auto",
                           interpolation="nearest")
            ax.grid(False)
            ax.set_title(f"{label}: L{layer} H{head}", fontsize=8)
            ax.set_xticks(np.arange(len(ADDITION_SOURCES)))
            ax.set_xticklabels(ADDITION_SOURCES, rotation=60, ha="right", fontsize=7.5)
            ax.set_yticks(np.arange(len(CHAIN)))
            ax.set_yticklabels(CHAIN, fontsize=7.5)
        axes[r, 0].set_ylabel("predicting")
    for ax in axes[-1]:
        ax.set_xlabel("operand digit read")
    fig.colorbar(im, ax=axes, label="attention mass", fraction=0.03, pad=0.02)
    return fig


# ---------------------------------------------------------------- every verdict at once
# Added for the closing chapter: the study's effects with their intervals, one row per
# comparison, coloured by verdict.

VERDICT_COLORS = {"better": GREEN, "worse": VERMILLION, "equivalent": BLUE,
                  "both at chance": ORANGE, "undecided": NEUTRAL}
REGIME_MARKERS = {"finite": "o", "fresh": "s"}
FOREST_METRICS = ("time_to_solve", "test_acc", "test_acc_8", "test_acc_12")
FOREST_TITLES = {"time_to_solve": "time to solve", "test_acc": "accuracy",
                 "test_acc_8": "accuracy at 8 pairs", "test_acc_12": "accuracy at 12 pairs"}
RATIO_LIMITS = (1 / 8, 8.0)  # the time panel's x range; effects beyond it sit on the edge


def _forest_values(row, ratio: bool):
    """(point, low, high, clipped) in the panel's unit: the median ratio as is (log axis),
    accuracy gaps in points. An effect outside the ratio limits (0 or ∞: one row never
    reached half its seeds solved) is drawn on the edge and flagged; an undefined effect
    (NaN) has no point."""
    if not ratio:
        return 100 * row.effect, 100 * row.ci_low, 100 * row.ci_high, 0
    lo_lim, hi_lim = RATIO_LIMITS

    def clip(x):
        return x if math.isnan(x) else min(max(x, lo_lim), hi_lim)
    e = row.effect
    clipped = 0 if math.isnan(e) else (1 if e > hi_lim else -1 if e < lo_lim else 0)
    return clip(row.effect), clip(row.ci_low), clip(row.ci_high), clipped


def forest_figure(v, metrics=FOREST_METRICS, regimes=("finite", "fresh")):
    """Every verdict of `v` (the frame of `comparisons.verdicts`) as a forest plot.

    One row per comparison and task (matrix, sweep and alphabet comparisons in the order
    of `v`), one panel per metric: the time to solve as the ratio of median steps,
    control / reference, on a log axis (below 1: the control solves sooner); accuracies
    as the paired gap control − reference in points. Each regime is a marker (finite: a
    circle, fresh: a square) with its 95 % interval, coloured by its verdict; the shaded
    band is the equivalence region (0.8–1.25, ±5 points). A ratio of 0 or ∞ (one row
    never reached half its seeds solved) sits on the panel's edge as a triangle."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from . import stats

    use_book_style()
    if len(v) == 0:
        raise ValueError("no verdicts to draw")
    base = v.metric.str.split("@").str[0]
    unknown = sorted(set(metrics) - set(FOREST_TITLES))
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(FOREST_TITLES)}")
    keep = base.isin(metrics) & v.regime.isin(regimes)
    if not keep.any():
        raise ValueError(f"no verdicts for metrics {list(metrics)} in regimes {list(regimes)}")
    d = v[keep].assign(base=base[keep])
    rows = list(dict.fromkeys(zip(d.comparison, d.task)))
    kind = dict(zip(zip(d.comparison, d.task), d.measurement))
    control = dict(zip(zip(d.comparison, d.task), d.control))
    group = {r: r[1] if kind[r] in ("matrix", "length") else kind[r] for r in rows}

    def row_label(r):  # matrix rows are all against llama (the caption says so)
        if group[r] == r[1]:
            return f"{control[r]} · {r[1]}"
        return r[0].replace("rope_theta=", "base ")
    y_of = {r: i for i, r in enumerate(rows)}
    offset = {r: (k - (len(regimes) - 1) / 2) * 0.32 for k, r in enumerate(regimes)}
    width = [1.35 if m == "time_to_solve" else 1.0 for m in metrics]
    fig, axes = plt.subplots(1, len(metrics), figsize=(1.9 * len(metrics) + 2.6, 0.27 * len(rows) + 1.6),
                             sharey=True, squeeze=False, gridspec_kw={"width_ratios": width})
    axes = axes[0]
    for ax, metric in zip(axes, metrics):
        ratio = metric == "time_to_solve"
        if ratio:
            ax.set_xscale("log")
            ax.set_xlim(*RATIO_LIMITS)
            ax.axvspan(*stats.RATIO_BOUNDS, color="0.9", lw=0, zorder=0)
            ax.axvline(1.0, color="0.45", lw=0.8, zorder=1)
            ax.set_xticks([0.125, 0.25, 0.5, 1, 2, 4, 8])
            ax.set_xticklabels(["⅛", "¼", "½", "1", "2", "4", "8"], fontsize=8)
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xlabel("median steps, control / reference\n← control sooner · later →", fontsize=8)
            ax.set_title("time to solve\n(log scale)", fontsize=9)
        else:
            margin = 100 * stats.EQUIVALENCE_MARGIN
            ax.axvspan(-margin, margin, color="0.9", lw=0, zorder=0)
            ax.axvline(0.0, color="0.45", lw=0.8, zorder=1)
            ax.set_xlim(-105, 105)
            ax.set_xticks([-100, -50, 0, 50, 100])
            ax.tick_params(axis="x", labelsize=8)
            ax.set_xlabel("control − reference (points)\n← control lower · higher →", fontsize=8)
        if not ratio:
            title = FOREST_TITLES[metric]
            at = [m.partition("@")[2] for m in d[d.base == metric].metric if "@" in m]
            if at and len(set(at)) == 1:
                title += f"\nat {int(at[0]):,} steps"
            ax.set_title(title, fontsize=9)
        ax.grid(axis="y", visible=False)
        for r in d[d.base == metric].itertuples():
            y = y_of[(r.comparison, r.task)] + offset[r.regime]
            color = VERDICT_COLORS.get(r.verdict, BLACK)
            point, low, high, clipped = _forest_values(r, ratio)
            if not (math.isnan(low) or math.isnan(high)):
                ax.plot([low, high], [y, y], color=color, lw=1.3, solid_capstyle="butt", zorder=2)
            if not math.isnan(point):
                marker = {1: ">", -1: "<"}.get(clipped, REGIME_MARKERS.get(r.regime, "o"))
                ax.plot([point], [y], marker=marker, color=color, ms=5.5, mec="white", mew=0.6,
                        ls="none", zorder=3)
    ax0 = axes[0]
    ax0.set_yticks(range(len(rows)))
    ax0.set_yticklabels([row_label(r) for r in rows], fontsize=8)
    ax0.set_ylim(len(rows) - 0.5, -0.5)
    for i in range(1, len(rows)):  # thin rules between the tasks, the sweep and the alphabet
        if group[rows[i]] != group[rows[i - 1]]:
            for ax in axes:
                ax.axhline(i - 0.5, color="0.75", lw=0.6, zorder=0)
    handles = [Line2D([], [], color=c, lw=1.3, marker="o", ms=5, label=k)
               for k, c in VERDICT_COLORS.items() if k in set(d.verdict)]
    handles += [Line2D([], [], color="0.3", ls="none", marker=REGIME_MARKERS.get(r, "o"), ms=5,
                       label=f"{r} data") for r in regimes]
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8,
                    borderaxespad=0.0)
    fig.tight_layout()
    return fig


__all__ = ["DPI", "FIGSIZE", "PALETTE", "VARIANT_COLORS", "TASK_COLORS", "use_book_style",
           "variant_color", "png_bytes", "show", "chance_line", "seed_points", "seed_curves",
           "legend_outside", "summary_figure", "km_axes", "km_figure", "loss_curves_axes",
           "loss_figure", "HEAT_CMAP", "attention_heatmap", "attention_grid",
           "position_heatmap", "recall_attention_figure", "recall_by_pair_figure",
           "addition_attention_figure", "VERDICT_COLORS", "forest_figure"]


# ---------------------------------------------------------------- time to solve and losses, any rows
# `km_figure` and `loss_figure` draw a variant's reference configuration (name answers,
# base 10,000). A chapter that compares other rows (RoPE bases, answer formulations)
# passes the runs or curves of each row itself.


def km_groups_axes(ax, groups: dict, colors: dict | None = None, cap: float | None = None,
                   band: bool = True):
    """Kaplan–Meier curves on one axis, one per entry of `groups` (label -> that row's
    runs, from `comparisons.runs`): the fraction of seeds solved by each step, its 95 % band
    shaded, a tick where a seed stopped unsolved. The legend gives k/n solved."""
    from . import stats

    for i, (label, g) in enumerate(groups.items()):
        if g.empty:
            continue
        color = (colors or {}).get(label, PALETTE[i % len(PALETTE)])
        until = cap if cap is not None else float(g.time.max())
        x, y = stats.km_curve(g.time, g.censored, until=until)
        k = int((~g.censored.astype(bool)).sum())
        ax.step(x, 100 * y, where="post", color=color, lw=2.0, label=f"{label} ({k}/{len(g)})")
        if band:
            est = stats.km(g.time, g.censored)
            bx = np.concatenate([[0.0], est.times, [until]])
            lo = np.concatenate([[0.0], 1 - est.high, [1 - est.high[-1]]])
            hi = np.concatenate([[0.0], 1 - est.low, [1 - est.low[-1]]])
            ax.fill_between(bx, 100 * lo, 100 * hi, step="post", color=color, alpha=0.12, lw=0)
        cens = g[g.censored.astype(bool)]
        if len(cens):
            ax.plot(cens.time, [100 * y[-1]] * len(cens), "|", color=color, ms=10, mew=1.5)
    ax.set_ylim(-3, 103)
    ax.set_xlabel("training step")
    ax.set_ylabel("seeds solved (%)")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: f"{t:,.0f}"))
    return ax


def km_panels_figure(panels: dict, colors: dict | None = None, cap: float | None = None,
                     legend_title: str = "solved by the cap"):
    """Time to solve, one panel per entry of `panels` (title -> {label -> runs})."""
    import matplotlib.pyplot as plt

    use_book_style()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1.6, 3.4),
                             sharey=True, squeeze=False)
    for ax, (title, groups) in zip(axes[0], panels.items()):
        km_groups_axes(ax, groups, colors=colors, cap=cap)
        ax.set_title(title)
        ax.legend(loc="upper left", fontsize=8, title=legend_title, title_fontsize=8)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


def loss_panels_figure(panels: dict, hline: float | None = None, hline_label: str | None = None,
                       ncols: int | None = None):
    """Training (solid) vs validation (dashed) loss, one panel per entry of `panels`
    (title -> the curves of one row: `load_curves()` filtered), solved seeds in one
    colour, unsolved in another; `hline` marks a reference loss (ln 4, say)."""
    import matplotlib.pyplot as plt

    use_book_style()
    ncols = ncols or len(panels)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols + 1.6, 2.9 * nrows),
                             sharey=True, sharex=True, squeeze=False)
    flat = axes.ravel()
    for i, (ax, (title, g)) in enumerate(zip(flat, panels.items())):
        if g.empty:
            raise ValueError(f"no curves for the panel {title!r}")
        loss_curves_axes(ax, g, legend=i == ncols - 1)
        if hline is not None:
            ax.axhline(hline, color=CHANCE_COLOR, lw=0.9, ls=":")
            if hline_label:
                ax.annotate(hline_label, xy=(1.0, hline), xycoords=("axes fraction", "data"),
                            xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                            fontsize=7.5, color=CHANCE_COLOR)
        ax.set_title(title)
        if i % ncols:
            ax.set_ylabel("")
        if i < len(panels) - ncols:
            ax.set_xlabel("")
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


__all__ += ["km_groups_axes", "km_panels_figure", "loss_panels_figure"]
