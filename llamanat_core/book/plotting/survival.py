"""Time to solve as a censored time: each arm's Kaplan–Meier curve of the share of seeds
not yet solved, its band at `CONFIDENCE`, and the runs that never solved marked at the cap where
they are censored (not tied). `kaplan_meier_cells`: the panels of the matrix's speed rows,
drawn by `matrix_survival_figure`."""
from __future__ import annotations

import warnings

import numpy as np
from matplotlib.lines import Line2D

from ...analysis.comparisons import seed_pairs, used_pairs
from ...analysis.stats import CONFIDENCE, kaplan_meier
from .style import CHANCE_COLOR, NEUTRAL, step_panel_grid, variant_color

REFERENCE = {"color": "#555555", "lw": 1.3, "ls": "--"}


def _curve(ax, times, solved, cap: float, style: dict) -> None:
    """One arm's Kaplan–Meier step curve from 0 to the cap, its pointwise band, and a
    tick at the cap for each run still unsolved there."""
    sf = kaplan_meier(times, solved)
    x = np.concatenate([[0.0], sf.quantiles, [cap]])
    y = np.concatenate([[1.0], sf.probabilities, [sf.probabilities[-1]]])
    ax.step(x, 100 * y, where="post", **style)
    with warnings.catch_warnings():  # the band is undefined where the curve reaches 0: no band there
        warnings.simplefilter("ignore", RuntimeWarning)
        band = sf.confidence_interval(CONFIDENCE)
    est = sf.probabilities
    low = np.where(np.isnan(band.low.probabilities), est, band.low.probabilities)
    high = np.where(np.isnan(band.high.probabilities), est, band.high.probabilities)
    lo, hi = (np.concatenate([[1.0], b, [b[-1]]]) for b in (low, high))
    ax.fill_between(x, 100 * lo, 100 * hi, step="post", color=style["color"], alpha=0.12, lw=0)
    unsolved = int((~np.asarray(solved, bool)).sum())
    if unsolved:
        ax.plot([cap], [100 * y[-1]], marker="|", ms=9, mew=1.6, color=style["color"], clip_on=False)


def kaplan_meier_figure(cells: dict, cap: float, reference: str = "reference", colors: dict | None = None,
                        notes: dict | None = None, panel: tuple[float, float] = (1.55, 1.3)):
    """A grid of panels, each one comparison: the share of seeds not yet solved by each
    step, reference dashed grey and control in its colour. `cells` maps (row title, column
    title) -> ((reference times, reference solved), (control times, control solved)), times
    the solve step or the cap; `notes` maps a cell to a short text written in the panel.
    No cells (a reader's short run may leave none to draw): None, which `show` skips."""
    if not cells:
        return None
    def draw(ax, cell, colour):
        ref, ctl = cells[cell]
        _curve(ax, *ref, cap, REFERENCE)
        _curve(ax, *ctl, cap, {"color": colour, "lw": 1.6})
        if notes and cell in notes:
            ax.text(0.04, 0.04, notes[cell], transform=ax.transAxes, ha="left", va="bottom", fontsize=7,
                    color=CHANCE_COLOR)  # bottom left: every curve starts at the top

    handles = [Line2D([], [], label=reference, **REFERENCE),
               Line2D([], [], color=NEUTRAL, lw=1.6, label="control (the column's, in its colour)"),
               Line2D([], [], color=NEUTRAL, marker="|", ls="", ms=9, mew=1.6, label="unsolved at the cap")]
    return step_panel_grid(cells, cap, 105, "not solved (%)", panel, draw, handles, colors)


def kaplan_meier_cells(results, survival) -> tuple[dict, dict, dict]:
    """`kaplan_meier_figure`'s (cells, notes, colors) for the matrix's speed rows of
    `survival` (`solve_times.speed_rows` with its censored verdicts): a panel per task and
    regime (a row of panels) and control (a column, in its colour), each arm's capped times
    and whether each run solved, on the seeds the row used, and its note the log-rank's and
    the restricted mean's verdicts. Empty when a reader's short run leaves no such row."""
    cells, notes, colors = {}, {}, {}
    by_row = survival.set_index(["measurement", "comparison", "task", "regime"])
    for key, pair in seed_pairs(results).items():
        if key[0] != "matrix" or key not in by_row.index:
            continue
        r, used = by_row.loc[key], used_pairs(pair, int(by_row.loc[key].n))
        cell = (f"{key[2]}, {key[3]}", key[1].split(" vs ")[0])
        cells[cell] = tuple((used[f"time_capped_{s}"], ~used[f"censored_{s}"].astype(bool)) for s in "rc")
        notes[cell], colors[cell[1]] = f"{r.logrank_verdict}; {r.rmst_verdict}", variant_color(cell[1])
    return cells, notes, colors


def matrix_survival_figure(results, survival, cap: float):
    """The Kaplan–Meier curves of the matrix's speed rows, each control against llama
    (`kaplan_meier_cells`); None when there is no row to draw."""
    cells, notes, colors = kaplan_meier_cells(results, survival)
    return kaplan_meier_figure(cells, cap, "reference: llama", colors, notes)
