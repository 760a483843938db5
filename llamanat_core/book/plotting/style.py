"""The book's look: palette, per-variant and per-task colours, the matplotlib style, and
deterministic PNGs.

Every chapter starts with ``use_book_style()`` and ends each figure with ``show(fig)``.
The same figure drawn twice gives byte-identical PNG bytes: Agg rendering, a fixed
dpi, a fixed SVG hash salt, and no "Software"/date metadata in the file, so an
executed notebook does not change when it is executed again.

Colours are fixed per variant (``VARIANT_COLORS``) and per task (``TASK_COLORS``), so
``llama`` is the same colour in every chapter, and no two variants share one. They come
from the Okabe-Ito palette and, for the three variants it cannot cover, Paul Tol's darker
colours; every two variant colours stay apart in normal vision and under the three
simulated colour-vision deficiencies (`colour_distance`).
"""
from __future__ import annotations

import sys
import warnings
from io import BytesIO

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd

from ...analysis.report import MINUS

DPI = 110  # pixels per inch of every PNG in the book
FIGSIZE = (7.0, 3.6)  # inches: a full-width figure at the book's text width
PNG_METADATA = {"Software": None}  # no matplotlib version string in the file
PRINT_KWARGS = {"bbox_inches": "tight", "metadata": PNG_METADATA}

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
NEUTRAL = "#7f7f7f"

BLUE, ORANGE, SKY, GREEN, VERMILION, PURPLE, BLACK = (
    "#0072B2", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#CC79A7", "#000000")
# Okabe-Ito has eight colours, one of them a yellow too pale for a line on white, and its
# sky blue sits next to llama's blue: three more, dark enough for lines, from Paul Tol's.
WINE, INDIGO, BROWN = "#882255", "#332288", "#661100"
# The text study's three added controls: the colours farthest from all of the above, in
# every simulated vision, among those dark enough for a line (searched on a grid).
VIOLET, PERIWINKLE, AUBERGINE = "#9900FF", "#99AAFF", "#330044"

# One colour per variant across the book, each far from every other (tested, also as
# readers with the common colour-vision deficiencies see them).
VARIANT_COLORS = {
    "llama": BLUE,
    "layernorm": ORANGE,
    "postnorm": PURPLE,
    "abs_pos": VERMILION,
    "gelu_mlp": GREEN,
    "mha": WINE,
    "mqa": BLACK,
    "untied": INDIGO,
    "bias": BROWN,
    "mha_matched": VIOLET,
    "geglu": AUBERGINE,
    "silu_mlp": PERIWINKLE,
}
# Groups of variants that share a figure (tested: no two of a group share a colour).
FIGURE_GROUPS = (("llama", "layernorm", "postnorm"), ("llama", "abs_pos"), ("llama", "gelu_mlp"),
                 ("llama", "mha", "mqa"), ("llama", "untied"), ("llama", "bias"),
                 ("llama", "mha", "mha_matched"), ("llama", "gelu_mlp", "geglu", "silu_mlp"))
TASK_COLORS = {"addition": BLUE, "recall": VERMILION}
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
    "axes.formatter.useoffset": False,  # a tick reads 1,205, never "+1.2e3" beside the axis
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
    """Apply the book's matplotlib style and show table cells whole; inside a kernel, make
    inline figures PNG-only with fixed dpi and no metadata, and silence tqdm's
    missing-widgets notice.
    Safe to call more than once."""
    if not _in_kernel():
        matplotlib.use("Agg")  # scripts and tests: never open a window
    matplotlib.rcParams.update(STYLE)
    pd.set_option("display.max_colwidth", None)  # a table cell is shown whole, never cut with "..."
    # The book renders notebooks without ipywidgets; tqdm's notice about that (raised when
    # transformers or a progress bar imports tqdm.auto) would otherwise land in the page.
    warnings.filterwarnings("ignore", message="IProgress not found")
    if _in_kernel():
        # only inside a kernel: the inline backend and IPython are a notebook's, not a script's
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png", **PRINT_KWARGS)


# Machado, Oliveira and Fernandes (2009), severity 1: linear RGB as a dichromat sees it.
VISIONS = {
    "normal": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}


def _lab(colour: str, vision: str) -> np.ndarray:
    """CIELAB (D65) of a hex colour as seen with `vision`."""
    srgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    linear = np.clip(np.array(VISIONS[vision]) @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def colour_distance(a: str, b: str, vision: str = "normal") -> float:
    """How far apart two colours look (CIE76 ΔE: about 2 is just noticeable, 100 is black
    to white), in normal vision or a simulated deficiency of `VISIONS`."""
    return float(np.linalg.norm(_lab(a, vision) - _lab(b, vision)))


def variant_color(name: str) -> str:
    """The book's colour for a variant (a neutral grey for anything unlisted)."""
    return VARIANT_COLORS.get(name, NEUTRAL)


def png_bytes(fig) -> bytes:
    """The exact PNG the book shows for `fig` (for tests and for byte comparisons). The
    figure's layout is fixed by the first call: later calls give the same bytes."""
    buf = BytesIO()
    # A layout engine places the axes anew at every draw, and over shared axes the places
    # move a little from one draw to the next: lay the figure out once and keep it, so the
    # first PNG of a figure is the same as every later one.
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    fig.savefig(buf, format="png", dpi=DPI, facecolor=fig.get_facecolor(), **PRINT_KWARGS)
    return buf.getvalue()


def show(fig) -> None:
    """Display `fig` once as an inline PNG and close it (no duplicate at the cell's end).
    None, what a figure function returns with nothing to draw (on a reader's short run),
    shows nothing."""
    if fig is None:
        return
    if _in_kernel():
        from IPython.display import Image, display  # only inside a kernel, as above

        display(Image(data=png_bytes(fig), format="png"))
    plt.close(fig)


def plain_number(x: float) -> str:
    """A number as a reader writes it: 0.001, 0.5, 2, 1,000, −25 (no 10⁰, no 1e-3, no
    hyphen for a minus sign)."""
    x = float(f"{x:.6g}")  # drop the float noise a locator leaves (0.30000000000000004)
    text = f"{x:,.0f}" if x == round(x) else np.format_float_positional(x, trim="-")
    return text.replace("-", MINUS)


def plain_ticks(ax, axis: str = "y") -> None:
    """Plain tick labels on one axis of `ax`, linear or log: no 10ⁿ, no ×10ⁿ minor labels,
    no offset. On a log axis spanning under three decades the ticks are 1, 2, 5 per decade,
    so at least a few carry a label. Call it once the axis limits are final."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    if a.get_scale() == "log":
        lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
        subs = (1.0, 2.0, 5.0) if np.log10(hi / lo) < 3 else (1.0,)
        a.set_major_locator(mticker.LogLocator(base=10, subs=subs))
        a.set_minor_locator(mticker.LogLocator(base=10, subs=np.arange(2, 10)))
    a.set_major_formatter(mticker.FuncFormatter(lambda v, _: plain_number(v)))
    a.set_minor_formatter(mticker.NullFormatter())


def colliding_tick_labels(fig) -> list[tuple[str, str]]:
    """Pairs of tick labels of `fig` that overlap once it is drawn, within one axis or
    between panels (the last x label of one panel and the first of the next)."""
    fig.canvas.draw()
    boxes = [(t.get_text(), t.get_window_extent()) for ax in fig.axes if ax.axison
             for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_visible() and t.get_text()]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
            if box_a.overlaps(box_b)]


def keep_end_labels_inside(ax) -> None:
    """The first x tick label aligned on its left, the last on its right, so the ends of
    panels set side by side ("4,800" and the next panel's "0") never meet."""
    labels = ax.get_xticklabels()
    if len(labels) > 1:
        labels[0].set_horizontalalignment("left")
        labels[-1].set_horizontalalignment("right")


VERDICT_COLORS = {"better": GREEN, "worse": VERMILION, "equivalent": BLUE,
                  "both at chance": PALETTE[4], "undecided": NEUTRAL, "rarely solved": "#b09a6e",
                  "mostly at chance": "#332288", "not learned": CHANCE_COLOR}
"""One colour per verdict kind of `comparisons.decide` (and the decision figures' `not
learned`), no two alike: rarely solved (too few solves to time) and mostly at chance (most
pairs uninformative) are different findings and are told apart."""


def step_panel_axes(ax, cap: float, top: float, title: str | None, ylabel: str | None,
                    xlabel: bool, title_colour: str = "black") -> None:
    """One panel of a grid of step curves (share solved, or not solved) over 0..`cap`
    steps: the same limits, ticks and labels in every such figure, so panels read alike.
    `top` leaves room above 100 % where a figure writes its notes."""
    ax.set_xlim(0, cap)
    ax.set_ylim(-3, top)
    ax.set_xticks([0, cap / 2, cap])
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:,.0f}")
    ax.set_yticks([0, 50, 100])
    if title is not None:
        ax.set_title(title, fontsize=9, color=title_colour)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=8.5)
    if xlabel:
        ax.set_xlabel("step", fontsize=8.5)
    ax.tick_params(labelsize=7.5)


def step_panel_grid(cells: dict, cap: float, top: float, ylabel: str, panel: tuple[float, float],
                    draw, handles: list, colors: dict | None = None):
    """A grid of step-curve panels: one per cell, keyed (row title, column title), rows and
    columns in the order the keys first appear, an empty panel where a pair is missing.
    `draw(ax, cell, colour)` draws a cell's curves in its column's colour; the grid sets
    every panel's axes (`step_panel_axes`), titles the top row by column and the left
    column by row, and puts `handles` in one legend row below."""
    use_book_style()
    rows = list(dict.fromkeys(r for r, _ in cells))
    cols = list(dict.fromkeys(c for _, c in cells))
    colors = colors or {}
    size = (panel[0] * len(cols) + 1.3, panel[1] * len(rows) + 0.9)
    fig, axes = plt.subplots(len(rows), len(cols), figsize=size, sharex=True, sharey=True, squeeze=False,
                             layout="constrained")
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            if (r, c) not in cells:
                ax.set_axis_off()
                continue
            draw(ax, (r, c), colors.get(c, PALETTE[3]))
            step_panel_axes(ax, cap, top, c if i == 0 else None, f"{r}\n{ylabel}" if j == 0 else None,
                            i == len(rows) - 1, colors.get(c, "black"))
    for ax in axes[-1]:  # after every panel's ticks are set (shared axes rebuild them)
        keep_end_labels_inside(ax)  # panels side by side: "4,800" never meets the next "0"
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8.5)
    return fig
