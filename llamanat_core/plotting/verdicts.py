"""Every verdict at once: the forest figure of the study's effects with their intervals,
one row per comparison, coloured by verdict.
"""
from __future__ import annotations

import math

import matplotlib.ticker

from .style import BLACK, BLUE, GREEN, NEUTRAL, ORANGE, VERMILLION, use_book_style

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

    use_book_style()
    d = _forest_verdicts(v, metrics, regimes)
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
        _forest_panel(ax, metric, d[d.base == metric])
        for r in d[d.base == metric].itertuples():
            _forest_point(ax, r, y_of[(r.comparison, r.task)] + offset[r.regime], metric == "time_to_solve")
    ax0 = axes[0]
    ax0.set_yticks(range(len(rows)))
    ax0.set_yticklabels([row_label(r) for r in rows], fontsize=8)
    ax0.set_ylim(len(rows) - 0.5, -0.5)
    for i in range(1, len(rows)):  # thin rules between the tasks, the sweep and the alphabet
        if group[rows[i]] != group[rows[i - 1]]:
            for ax in axes:
                ax.axhline(i - 0.5, color="0.75", lw=0.6, zorder=0)
    _forest_legend(axes[-1], set(d.verdict), regimes)
    fig.tight_layout()
    return fig


def _forest_verdicts(v, metrics, regimes):
    """The verdicts the figure draws, with their metric's base name (`test_acc`, not
    `test_acc@1200`) in a column `base`; ValueError when there are none or a metric is unknown."""
    if len(v) == 0:
        raise ValueError("no verdicts to draw")
    base = v.metric.str.split("@").str[0]
    unknown = sorted(set(metrics) - set(FOREST_TITLES))
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(FOREST_TITLES)}")
    keep = base.isin(metrics) & v.regime.isin(regimes)
    if not keep.any():
        raise ValueError(f"no verdicts for metrics {list(metrics)} in regimes {list(regimes)}")
    return v[keep].assign(base=base[keep])


def _forest_panel(ax, metric: str, d) -> None:
    """One metric's axis: scale, equivalence band, no-effect line, ticks, labels, title.
    `d` holds that metric's verdicts (their checkpoint goes into an accuracy title)."""
    from .. import stats

    if metric == "time_to_solve":
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
        title = FOREST_TITLES[metric]
        at = [m.partition("@")[2] for m in d.metric if "@" in m]
        if at and len(set(at)) == 1:
            title += f"\nat {int(at[0]):,} steps"
        ax.set_title(title, fontsize=9)
    ax.grid(axis="y", visible=False)


def _forest_point(ax, r, y: float, ratio: bool) -> None:
    """One verdict at height y: its interval and its point, in its verdict's colour."""
    color = VERDICT_COLORS.get(r.verdict, BLACK)
    point, low, high, clipped = _forest_values(r, ratio)
    if not (math.isnan(low) or math.isnan(high)):
        ax.plot([low, high], [y, y], color=color, lw=1.3, solid_capstyle="butt", zorder=2)
    if not math.isnan(point):
        marker = {1: ">", -1: "<"}.get(clipped, REGIME_MARKERS.get(r.regime, "o"))
        ax.plot([point], [y], marker=marker, color=color, ms=5.5, mec="white", mew=0.6,
                ls="none", zorder=3)


def _forest_legend(ax, verdicts: set, regimes) -> None:
    """The verdicts present and the regimes' markers, outside the last panel."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, lw=1.3, marker="o", ms=5, label=k)
               for k, c in VERDICT_COLORS.items() if k in verdicts]
    handles += [Line2D([], [], color="0.3", ls="none", marker=REGIME_MARKERS.get(r, "o"), ms=5,
                       label=f"{r} data") for r in regimes]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8,
              borderaxespad=0.0)
