"""When runs solve and how their losses move: Kaplan–Meier curves of time to solve (one
per variant, or per any group of runs) and training/validation loss curves per seed.
"""
from __future__ import annotations

import matplotlib
import matplotlib.ticker
import numpy as np

from .seeds import legend_outside
from .style import BLUE, CHANCE_COLOR, PALETTE, VERMILLION, use_book_style, variant_color

# ---------------------------------------------------------------- time to solve and losses


def km_axes(ax, runs, variants, task: str, regime: str, cap: float | None = None,
            labels: dict | None = None, band: bool = True):
    """Kaplan–Meier curves on one axis: the fraction of seeds solved by each step (one
    step curve per variant, its 95 % band shaded), a tick where a seed stopped unsolved
    (censored at the cap). `runs` is `comparisons.runs(results)`."""
    from ..comparisons import variant_rows

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

    from ..comparisons import variant_rows

    use_book_style()
    fig, axes = plt.subplots(1, len(regimes), figsize=(4.2 * len(regimes) + 0.6, 3.4),
                             sharey=True, squeeze=False)
    for ax, regime in zip(axes[0], regimes):
        g = variant_rows(curves, variant, task, regime)
        if g.empty:
            raise ValueError(f"no curves for {variant} on {task} in the {regime} regime")
        loss_curves_axes(ax, g, legend=ax is axes[0][-1])
        if hline is not None:
            _reference_line(ax, hline, hline_label)
        ax.set_title(f"{variant}, {task}, {regime} data")
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- time to solve and losses, any rows
# `km_figure` and `loss_figure` draw a variant's reference configuration (name answers,
# base 10,000). A chapter that compares other rows (RoPE bases, answer formulations)
# passes the runs or curves of each row itself.


def km_groups_axes(ax, groups: dict, colors: dict | None = None, cap: float | None = None,
                   band: bool = True):
    """Kaplan–Meier curves on one axis, one per entry of `groups` (label -> that row's
    runs, from `comparisons.runs`): the fraction of seeds solved by each step, its 95 % band
    shaded, a tick where a seed stopped unsolved. The legend gives k/n solved."""
    from .. import stats

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
            _reference_line(ax, hline, hline_label)
        ax.set_title(title)
        if i % ncols:
            ax.set_ylabel("")
        if i < len(panels) - ncols:
            ax.set_xlabel("")
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _reference_line(ax, y: float, label: str | None) -> None:
    """A dotted horizontal line at loss `y` (e.g. ln 4), labelled at the right edge."""
    ax.axhline(y, color=CHANCE_COLOR, lw=0.9, ls=":")
    if label:
        ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=7.5, color=CHANCE_COLOR)
