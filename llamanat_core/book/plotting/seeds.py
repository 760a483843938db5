"""Per-seed figures: each seed's value as a point (or a curve) per row, the chance floor
of an accuracy axis, and the summary of the matrix.

They take the seed tables and tidy frames of `llamanat_core.analysis.report`; every accuracy
figure draws its chance floor (`chance_line`), and seeds shared by several rows are
joined by thin lines, so a reader sees which seed moved which way.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...analysis.report import METRIC_NAMES, chance_label
from ...analysis.stats import chance_floor
from ...data.tasks import TRAIN_PAIRS
from ...model.config import REGIMES
from ...study import EXTRAPOLATE
from .style import BLUE, CHANCE_COLOR, PALETTE, TASK_COLORS, VARIANT_COLORS, plain_ticks, variant_color


def _label(index) -> str:
    return " / ".join(str(i) for i in index) if isinstance(index, tuple) else str(index)


def chance_line(ax, chance: float, percent: bool = True, label: bool = True):
    """The chance floor of an accuracy axis: a dotted line, labelled 'chance 1/4' just
    outside the right edge of the axes, beside the line's end, where it covers no data."""
    y = 100 * chance if percent else chance
    ax.axhline(y, color=CHANCE_COLOR, lw=0.9, ls=":", zorder=1)
    if label:
        margin_label(ax, y, f"chance {chance_label(chance)}")
    return ax


def margin_label(ax, y: float, text: str):
    """`text` just outside the right edge of `ax`, centred on height `y` (data): a label for
    a horizontal line that never lands on a point or a curve."""
    return ax.annotate(text, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                       textcoords="offset points", ha="left", va="center", fontsize=7.5,
                       color=CHANCE_COLOR, annotation_clip=False)


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


def accuracy_grid(tables: dict, step: int, figsize=(8, 6.4)):
    """Accuracy at one checkpoint, a panel per task (rows) × data regime (columns): each
    seed a point (`seed_points`), the task's chance floor dotted, titled 'task, regime
    data: step N'. `tables` maps (task, regime) to a seed table; tasks and regimes are
    drawn in the order their keys first appear."""
    tasks = list(dict.fromkeys(t for t, _ in tables))
    regimes = list(dict.fromkeys(r for _, r in tables))
    fig, axes = plt.subplots(len(tasks), len(regimes), figsize=figsize, sharey=True, squeeze=False)
    for row, t in zip(axes, tasks):
        for ax, r in zip(row, regimes):
            seed_points(ax, tables[t, r], color=TASK_COLORS[t], chance=chance_floor(t))
            ax.set_title(f"{t}, {r} data: step {step:,}")
    fig.tight_layout()
    return fig


def length_panels(data, title: str, rows, pairs=(TRAIN_PAIRS, *EXTRAPOLATE), regimes=REGIMES):
    """Recall accuracy against the item's length, one panel per data regime: a curve per
    seed and the mean for each of `rows` (variants, in their colours), and the chance
    floor, which falls with the item (1/4, 1/8, 1/12). `data` has the columns regime,
    variant, seed, pairs and accuracy; the models were trained at `TRAIN_PAIRS` pairs."""
    colors = {v: variant_color(v) for v in rows}
    fig, axes = plt.subplots(1, len(regimes), figsize=(8.6, 3.6), sharey=True)
    for ax, regime in zip(axes, regimes):
        d = data[data.regime == regime]
        if len(d):
            seed_curves(ax, d, "variant", "accuracy", order=[v for v in rows if v in set(d.variant)],
                        x="pairs", colors=colors, legend=False)
        floor = [100 * chance_floor("recall", n) for n in pairs]
        ax.plot(list(pairs), floor, color="#555555", lw=0.9, ls=":", label="chance (1/pairs)")
        ax.set_xticks(list(pairs))
        ax.set_xlabel(f"key/value pairs in the test item (trained at {TRAIN_PAIRS})")
        ax.set_ylabel("recall accuracy (%)")
        ax.set_ylim(-3, 103)
        ax.set_title(f"{regime} data: {title}")
    legend_outside(axes[-1], fontsize=8)
    fig.tight_layout()
    return fig


def depth_figure(depth, stds: tuple[float, float], colors: dict[str, str], top: float = 1e4):
    """The residual stream's RMS against depth, one row of panels per init std in `stds`,
    each panel one placement against pre-norm (the reference): "post", then "none". Each
    seed a thin line, their mean thick, on a log scale; `depth` is the norm chapter's frame
    (init_std, norm_position, layer, rms, seed), `colors` one colour per placement. A
    stream on its way to overflow leaves the plot above `top` (the first column's rows)."""
    placements = ["pre", "post", "none"]
    missing = [p for p in placements if p not in colors]
    if missing:
        raise ValueError(f"colors lacks the placement(s) {missing}")
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.2), sharex=True, sharey="row", layout="constrained")
    for row, std in zip(axes, stds):
        for ax, other in zip(row, ("post", "none")):
            seed_curves(ax, depth[(depth.init_std == std) & depth.norm_position.isin(["pre", other])],
                        "norm_position", "rms", order=["pre", other], percent=False, x="layer",
                        colors=colors, legend=False)
            ax.set_yscale("log")
            ax.set(xlabel="depth (0 = the embedding)" if std == stds[-1] else "",
                   ylabel="RMS of the residual stream" if other == "post" else "",
                   title=f"init std {std:g}: {other} against pre")
        row[0].set_ylim(top=min(row[0].get_ylim()[1], top))
        plain_ticks(row[0], "y")
    handles = {line.get_label(): line for ax in axes.flat for line in ax.get_lines()
               if not line.get_label().startswith("_")}
    fig.legend(handles=[handles[p] for p in placements], title="norm placement (mean of the seeds)",
               loc="outside lower center", ncol=len(placements), fontsize=8.5)
    return fig
