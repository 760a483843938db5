"""Figures of the tuned text study: each arm's learning-rate bracket (`bracket_figure`), the
loss along a window (`position_figure`), and each mechanism's per-seed differences at both
sizes beside the margin (`size_differences_figure`).
Imported as a module: `from llamanat_core.book.plotting import tuned`."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...analysis.scorecard import BITS_PER_NAT, DIFFERENCE_COLUMNS, MECHANISMS
from ...analysis.text_design import MARGIN, REFERENCE
from .style import BLUE, NEUTRAL, VERMILION, plain_ticks, use_book_style, variant_color

SIZE_STYLE = {"S": (BLUE, "o", -0.18), "M": (VERMILION, "D", 0.18)}
"""Per size: colour, marker, and its offset from the arm's row (S above, M below)."""


def _colour(name_or_colour: str) -> str:
    return name_or_colour if name_or_colour.startswith("#") else variant_color(name_or_colour)


def bracket_figure(means: pd.DataFrame, size: str = "S", columns: int = 4):
    """One small panel per arm at `size` (`scorecard.bracket_means`): its mean validation
    loss over seeds 0-2 at each rate tried, in bits per character on a log-2 rate axis,
    the reference's bracket in grey behind it, the selected rate filled once interior. A
    rate still missing seeds is left out; an arm's line has gid "bracket ARM"."""
    rows = means[(means["size"] == size) & means["mean"].notna()]
    if rows.empty:
        raise ValueError(f"no complete rate of any arm at size {size!r} in the bracket means")
    arms = [a for a in dict.fromkeys(rows.arm) if a != REFERENCE]
    ref = rows[rows.arm == REFERENCE]
    use_book_style()
    n_rows = max(1, math.ceil(len(arms) / columns))
    # each panel its own loss scale: one diverged rate would flatten every other bracket
    fig, axes = plt.subplots(n_rows, columns, figsize=(6.4, 1.55 * n_rows + 0.4), sharex=True,
                             layout="constrained", squeeze=False)
    scales = sorted(rows.lr_scale.unique())
    for ax, arm in zip(axes.flat, arms):
        if len(ref):
            ax.plot(ref.lr_scale, ref["mean"] * BITS_PER_NAT, color=NEUTRAL, lw=1.2, marker=".")
        g = rows[rows.arm == arm]
        colour = _colour(arm) if not arm.startswith("base ") else BLUE
        ax.plot(g.lr_scale, g["mean"] * BITS_PER_NAT, color=colour, lw=1.6, marker="o", ms=3.5,
                markerfacecolor="white", gid=f"bracket {arm}")
        best = g[g.best]
        ax.plot(best.lr_scale, best["mean"] * BITS_PER_NAT, ls="none", marker="o", ms=5, color=colour)
        ax.set_title(MECHANISMS.get(arm, arm), fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(scales, [f"×{k:g}" for k in scales])
        ax.minorticks_off()
        ax.tick_params(labelsize=7.5)
    for ax in axes.flat[len(arms):]:
        ax.set_visible(False)
    fig.supxlabel("peak learning rate (× the first edition's)", fontsize=9)
    fig.supylabel("validation loss (bits per character)", fontsize=9)
    return fig


def position_figure(curves: dict[str, np.ndarray], colours: dict[str, str]):
    """Loss at each position of a window, one line per model (e.g. per rotation base):
    `curves` maps a label to `inside.loss_by_position`'s nats per character, drawn in bits
    per character; `colours` maps each label to a colour or a variant name. Position 0
    reads only its own character, so every curve starts high."""
    missing = [label for label in curves if label not in colours]
    if missing:
        raise ValueError(f"colours lacks the label(s) {missing}")
    use_book_style()
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for label, nats in curves.items():
        bits = np.asarray(nats, dtype=float) / math.log(2)  # (T,)
        ax.plot(np.arange(len(bits)), bits, color=_colour(colours[label]), lw=1.8, label=label)
    ax.set_xlabel("position in the window (position t reads t + 1 characters)")
    ax.set_ylabel("held-out loss (bits per character)")
    plain_ticks(ax, "y")
    ax.legend(fontsize=8.5)
    return fig


def arm_order(frame: pd.DataFrame) -> list[str]:
    """Arms by their median difference at S (most negative, the best, first); arms without
    S rows after them, by their median at M."""
    med = frame.groupby(["size", "arm"]).difference.median()
    s = med.get("S", pd.Series(dtype=float)).sort_values(kind="stable")
    rest = med.drop("S", level="size", errors="ignore").droplevel("size")
    rest = rest[~rest.index.isin(s.index)].groupby(level=0).min().sort_values(kind="stable")
    return list(s.index) + list(rest.index)


def size_differences_figure(frame: pd.DataFrame):
    """Per mechanism (arm, one row each), each seed's paired difference arm − reference
    (each at its own best rate: `scorecard.tuned_differences`, in nats per character)
    drawn in bits per character, the scorecard's unit, at S and at M side by side, the
    median of each a bar, the margin ±`MARGIN` shaded; arms ordered by their median at S
    and named as the scorecard names them. A point's gid is "arm|size" (the tests read
    them back)."""
    missing = [c for c in ("size", "arm", "difference") if c not in frame.columns]
    if missing:
        raise ValueError(f"the differences frame lacks column(s) {missing}; it needs {DIFFERENCE_COLUMNS}")
    sizes = set(frame["size"]) - set(SIZE_STYLE)
    if sizes:
        raise ValueError(f"column size must hold {sorted(SIZE_STYLE)}, got {sorted(sizes)}")
    arms = arm_order(frame)
    use_book_style()
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.38 * max(len(arms), 1)), layout="constrained")
    margin = MARGIN * BITS_PER_NAT
    ax.axvspan(-margin, margin, color=NEUTRAL, alpha=0.18, lw=0, label=f"margin ±{margin:.4f}")
    ax.axvline(0.0, color=NEUTRAL, lw=0.8)
    labelled = set()  # one legend entry per size
    for i, arm in enumerate(arms):
        for size, (colour, marker, offset) in SIZE_STYLE.items():
            nats = frame.loc[(frame["size"] == size) & (frame.arm == arm), "difference"].to_numpy(float)
            d = nats * BITS_PER_NAT
            if not len(d):
                continue
            dots = ax.scatter(d, np.full(len(d), i + offset), s=14, color=colour, marker=marker, alpha=0.55,
                              lw=0, label=None if size in labelled else f"size {size}")
            labelled.add(size)
            dots.set_gid(f"{arm}|{size}")
            ax.plot([np.median(d)] * 2, [i + offset - 0.14, i + offset + 0.14], color=colour, lw=2.2,
                    gid=f"median {arm}|{size}")
    ax.set_yticks(range(len(arms)), [MECHANISMS.get(a, a) for a in arms])
    ax.set_ylim(len(arms) - 0.5, -0.5)  # the first arm on top
    ax.set_xlabel("arm − reference, held-out test loss (bits per character)")
    plain_ticks(ax, "x")
    ax.legend(fontsize=8.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    return fig

