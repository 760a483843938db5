"""How runs' losses move: training and validation loss curves per seed, per variant or
per any group of runs.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker
from matplotlib.lines import Line2D

from ...analysis.comparisons import variant_rows
from ...model.config import REGIMES
from .seeds import legend_outside
from .style import BLUE, CHANCE_COLOR, NEUTRAL, VERMILION, plain_ticks, use_book_style, variant_color

# ---------------------------------------------------------------- losses

GROUPS = (("solved", False, BLUE), ("unsolved", True, VERMILION))
"""The rows of a loss figure: (name, the runs' `censored` flag, colour)."""


LINE_STYLES = {"train_loss": "-", "val_loss": "--"}
"""How a loss figure draws each loss: training solid, validation dashed."""


def loss_curves_axes(ax, curves, color=BLUE, columns=("train_loss", "val_loss"), log: bool = True):
    """Training (solid) and validation (dashed) loss of the runs in `curves` (one variant,
    task and regime, usually one outcome): each run as a faint line, and the median of the
    runs as a thick line over the steps every run reaches (a solved run stops early, and a
    median over the runs still training would jump each time one stops). A gap opening
    between the two lines is memorisation; both flat together is a plateau. `columns`
    picks which losses are drawn; `log` a log axis (losses spanning decades)."""
    for _seed, g in curves.groupby("seed", sort=True):
        g = g.sort_values("step")
        for column in columns:
            ax.plot(g.step, g[column], color=color, lw=0.7, ls=LINE_STYLES[column], alpha=0.3)
    for column in columns:
        every = curves.pivot_table(index="step", columns="seed", values=column).dropna()
        ax.plot(every.index, every.median(axis=1), color=color, lw=2.0, ls=LINE_STYLES[column])
    ax.set_yscale("log" if log else "linear")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats)")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: f"{t:,.0f}"))
    return ax


def early_loss_figure(curves, panels, by: str, colors: dict[str, str], until: int,
                      hline: float | None = None, hline_label: str | None = None):
    """The training loss of the first `until` steps, one panel per variant of `panels`, one
    colour per value of the column `by` (`colors`: value -> colour): every seed faint and
    the median thick (`loss_curves_axes`, on a linear axis: the first steps span no
    decades), and `hline` (e.g. ln 4) dotted in every panel."""
    use_book_style()
    fig, axes = plt.subplots(1, len(panels), figsize=(10, 3.2), sharey=True, squeeze=False)
    for ax, variant in zip(axes[0], panels):
        for value, color in colors.items():
            g = curves[(curves.variant == variant) & (curves[by] == value) & (curves.step <= until)]
            if g.empty:
                raise ValueError(f"no curves for {variant} with {by}={value!r} up to step {until}")
            loss_curves_axes(ax, g, color, columns=("train_loss",), log=False)
        if hline is not None:
            ax.axhline(hline, color=CHANCE_COLOR, lw=0.9, ls=":")
        ax.set(title=variant, ylabel="")
    axes[0, 0].set_ylabel("training loss (nats)")
    handles = [Line2D([], [], color=color, lw=2.0, label=f"{value}, median")
               for value, color in colors.items()]
    handles.append(Line2D([], [], color=NEUTRAL, lw=0.7, alpha=0.6, label="one seed"))
    if hline is not None and hline_label:
        handles.append(Line2D([], [], color=CHANCE_COLOR, lw=0.9, ls=":", label=hline_label))
    legend_outside(axes[0, -1], handles=handles, title=by)
    fig.tight_layout()
    return fig


def loss_figure(curves, variant: str, task: str, regimes=REGIMES, hline: float | None = None,
                hline_label: str | None = None):
    """Training vs validation loss of every seed of one variant and task: a column per
    regime, a row for the seeds that solved and one for those that did not (each panel its
    seeds faint and their median thick). `hline` draws a dotted line (e.g. at ln 4) in every
    panel, named `hline_label` in the legend."""
    use_book_style()
    fig, axes = plt.subplots(len(GROUPS), len(regimes), figsize=(4.0 * len(regimes) + 1.0, 5.2),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for j, regime in enumerate(regimes):
        runs = variant_rows(curves, variant, task, regime)
        if runs.empty:
            raise ValueError(f"no curves for {variant} on {task} in the {regime} regime")
        n = runs.seed.nunique()
        for i, (name, censored, color) in enumerate(GROUPS):
            ax, g = axes[i, j], runs[runs.censored == censored]
            k = g.seed.nunique()
            if k:
                loss_curves_axes(ax, g, color)
            else:  # an empty row keeps its panel, so the grid reads the same in every figure
                ax.text(0.5, 0.5, f"no seed {name}", transform=ax.transAxes, ha="center", va="center",
                        fontsize=9, style="italic", color=CHANCE_COLOR)
            if hline is not None:
                ax.axhline(hline, color=CHANCE_COLOR, lw=0.9, ls=":")
            ax.set_title(f"{regime} data: {k} of {n} seeds {name}", fontsize=9.5, color=color)
            ax.set_xlabel("training step" if i == len(GROUPS) - 1 else "")
            ax.set_ylabel("loss (nats)" if j == 0 else "")
    for ax in axes.flat:  # the shared axis, once every panel has set its limits
        ax.set_yscale("log")
        plain_ticks(ax, "y")
    fig.suptitle(f"{variant}, {task}", fontsize=11, fontweight="bold")
    handles = [Line2D([], [], color=NEUTRAL, lw=2.0, label="training loss, median"),
               Line2D([], [], color=NEUTRAL, lw=2.0, ls="--", label="validation loss, median"),
               Line2D([], [], color=NEUTRAL, lw=0.7, alpha=0.6, label="one seed")]
    if hline is not None and hline_label:
        handles.append(Line2D([], [], color=CHANCE_COLOR, lw=0.9, ls=":", label=hline_label))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8.5)
    return fig


def text_loss_figure(curves, baselines: dict[str, float] | None = None, ngrams: dict | None = None):
    """Training and validation loss on text, in bits per character, of every seed in
    `curves` (faint) and their median (thick), with each of `baselines` (label -> nats per
    character) as a dotted line, and the counted 3-, 4- and 5-gram models on the same
    validation half (`ngrams`: `ngram.load_ngram_baselines()`), if given."""
    use_book_style()
    bits = curves.assign(train_loss=curves.train_loss / math.log(2), val_loss=curves.val_loss / math.log(2))
    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    loss_curves_axes(ax, bits, BLUE)
    for i, (label, nats) in enumerate((baselines or {}).items()):
        ax.axhline(nats / math.log(2), color=CHANCE_COLOR, lw=0.9, ls=":")
        ax.annotate(label, (1.0, nats / math.log(2)), xycoords=("axes fraction", "data"),
                    xytext=(-4, 3 + 9 * (i % 2)), textcoords="offset points", ha="right",
                    fontsize=8, color=CHANCE_COLOR)
    if ngrams is not None:
        draw_ngram_lines(ax, ngrams, half="val", unit="bits")
    ax.set_ylabel("loss (bits per character)")
    plain_ticks(ax, "y")
    ax.plot([], [], color=BLUE, lw=2.0, label="training, median")
    ax.plot([], [], color=BLUE, lw=2.0, ls="--", label="validation, median")
    ax.legend(fontsize=8.5, loc="upper center")
    return fig


def draw_ngram_lines(ax, baselines: dict, orders=(3, 4, 5), half: str = "val",
                     smoothing: str = "witten_bell", unit: str = "nats") -> list:
    """The counted models of `ngram.load_ngram_baselines()` as dotted horizontal lines on
    `ax`, one per order, each labelled at the right edge ("3-gram"): their loss on the
    held-out `half` ("val" or "test") in `unit` per character ("nats", as the networks'
    losses are computed, or "bits", as the text figures draw them). Returns the lines."""
    if half not in ("val", "test"):
        raise ValueError(f"half must be 'val' or 'test', got {half!r}")
    if unit not in ("nats", "bits"):
        raise ValueError(f"unit must be 'nats' or 'bits', got {unit!r}")
    table = baselines.get(smoothing)
    if table is None:
        raise ValueError(f"smoothing {smoothing!r} is not in the baselines; they hold "
                         f"{sorted(k for k, v in baselines.items() if isinstance(v, dict) and '1' in v)}")
    missing = [n for n in orders if str(n) not in table]
    if missing:
        raise ValueError(f"orders {missing} are not in the {smoothing} baselines (orders {sorted(table)})")
    lines = []
    for n in orders:
        y = table[str(n)][half][unit]
        lines.append(ax.axhline(y, color=CHANCE_COLOR, lw=0.9, ls=":", label=f"{n}-gram"))
        ax.annotate(f"{n}-gram", (1.0, y), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                    textcoords="offset points", ha="right", fontsize=8, color=CHANCE_COLOR)
    return lines


def text_arms_figure(curves, arms: dict[str, str], ngrams: dict | None = None):
    """Validation loss on the held-out novel, in bits per character, of several text arms:
    each seed faint and the arms' medians thick, one colour per arm. `arms` maps a label
    to a `variant_color` name or a colour ("#RRGGBB"); `curves` carries a `label` column
    naming each run's arm. `ngrams` (`ngram.load_ngram_baselines()`): the counted 3-, 4-
    and 5-gram models on the same validation half, dotted."""
    use_book_style()
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for label, colour_of in arms.items():
        g = curves[curves.label == label].assign(bits=lambda d: d.val_loss / math.log(2))
        if g.empty:  # an arm whose runs have not started
            continue
        colour = _colour(colour_of)
        for _seed, s in g.groupby("seed"):
            ax.plot(s.step, s.bits, color=colour, lw=0.6, alpha=0.25)
        median = g.pivot_table(index="step", columns="seed", values="bits").median(axis=1)
        ax.plot(median.index, median.values, color=colour, lw=2.0,
                label=f"{label} ({g.seed.nunique()} seeds)")
    if ngrams is not None:
        draw_ngram_lines(ax, ngrams, half="val", unit="bits")
    ax.set_yscale("log")
    plain_ticks(ax, "y")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out loss (bits per character)")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: f"{t:,.0f}"))
    ax.legend(fontsize=8.5)
    return fig


def _colour(name_or_colour: str) -> str:
    return name_or_colour if name_or_colour.startswith("#") else variant_color(name_or_colour)


def text_windows_figure(runs, arms: dict[str, str], context: int, ngrams: dict | None = None):
    """Held-out loss in bits per character at the end of training, read on windows of 1, 2
    and 4 times the training `context`, of several text arms: each seed a faint line, the
    arms' means thick. `arms` maps a label to a variant name or a colour, as in
    `text_arms_figure`; `runs` carries a `label` column (`text_comparisons.labelled_runs`).
    `ngrams`: the counted 3-, 4- and 5-gram models on the same held-out half, dotted."""
    import matplotlib.pyplot as plt

    use_book_style()
    columns = {1: "loss_end", 2: "loss_2x", 4: "loss_4x"}
    x = [k * context for k in columns]
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for label, colour_of in arms.items():
        g = runs[runs.label == label]
        if g.empty:  # an arm whose runs have not started
            continue
        bits = g[list(columns.values())].to_numpy(float) / math.log(2)  # (seeds, windows)
        for row in bits:
            ax.plot(x, row, color=_colour(colour_of), lw=0.6, alpha=0.3)
        ax.plot(x, bits.mean(axis=0), color=_colour(colour_of), lw=2.0, marker="o",
                label=f"{label} ({len(g)} seed{'s' if len(g) != 1 else ''})")
    if ngrams is not None:  # the endpoints are read on the test half, and so are these
        draw_ngram_lines(ax, ngrams, half="test", unit="bits")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [f"{n:,}" + (" (trained)" if n == context else "") for n in x])
    ax.minorticks_off()
    plain_ticks(ax, "y")
    ax.set_xlabel("window read (characters)")
    ax.set_ylabel("held-out loss (bits per character)")
    ax.legend(fontsize=8.5)
    return fig
