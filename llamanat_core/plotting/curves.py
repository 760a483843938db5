"""How runs' losses move: training and validation loss curves per seed, per variant or
per any group of runs.
"""
from __future__ import annotations

import matplotlib
import matplotlib.ticker

from .seeds import legend_outside
from .style import BLUE, CHANCE_COLOR, VERMILION, use_book_style

# ---------------------------------------------------------------- losses


def loss_curves_axes(ax, curves, seeds=None, solved_color=BLUE, unsolved_color=VERMILION,
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


# ---------------------------------------------------------------- losses, any rows
# `loss_figure` draws a variant's reference configuration (name answers, base 10,000). A
# chapter that compares other rows (RoPE bases, answer formulations) passes the curves of
# each row itself.


def _reference_line(ax, y: float, label: str | None) -> None:
    """A dotted horizontal line at loss `y` (e.g. ln 4), labelled at the right edge."""
    ax.axhline(y, color=CHANCE_COLOR, lw=0.9, ls=":")
    if label:
        ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=7.5, color=CHANCE_COLOR)
