"""The figures of the study's decisions, drawn with the book's style and colour-blind-safe
palette; their words (labels, effects, titles) come from `llamanat_core.analysis.decision_tables`.

- `decision_forest`: the primary endpoints as small multiples, one panel per measurement ×
  endpoint, every interval inside its panel, the equivalence margin shaded, ratios on a log
  axis with plain tick labels;
- `solve_curves_figure`: the share of seeds solved by each step, at most two curves a
  panel (the reference and one control); the time is capped, so every run is observed;
  its panels for the matrix's speed rows (`matrix_speed_cells`, drawn by
  `matrix_speed_figure`) and for the sweep's and the alphabet's (`recall_speed_cells`,
  `recall_speed_figure`);
- `seed_strip_figure`: per-seed values of a few comparisons, each seed's two runs joined
  by a faint line, the two medians by a thick one; its panels for decision rows
  (`seed_strip_panels`);
- `inversion_figure`: an interval read off its test, p against the shift.

The verdict colours are `VERDICT_COLORS`, one per verdict kind.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ...analysis.comparisons import ENDPOINTS
from ...analysis.decision_tables import (
    MEASUREMENT_TITLES,
    METRIC_TITLES,
    SHORT_TITLES,
    is_ratio,
    paired_values,
    row_label,
)
from ...analysis.stats import chance_floor
from .seeds import chance_line, legend_outside, margin_label
from .style import (
    CHANCE_COLOR,
    NEUTRAL,
    PALETTE,
    VERDICT_COLORS,
    plain_number,
    step_panel_grid,
    use_book_style,
    variant_color,
)

RATIO_TICKS = (0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50)
FINE_RATIO_TICKS = (0.25, 0.4, 0.8, 1.25, 2.5, 4)
COLORS = VERDICT_COLORS
"""Verdict colours; at chance is reddish purple here, far from the vermilion of `worse`."""
MARGIN_COLOR = "#cfe3f2"
MARGIN_LABEL = "equivalence margin"
NULL_LABEL = "no difference"
STEP_TICKS = (50, 100, 200, 300, 500, 1000, 2000, 3000, 5000, 10000)
REFERENCE_STYLE = {"color": "#666666", "lw": 1.4, "ls": "--"}
"""The reference's curve: grey and dashed, apart from every control colour (black included)."""
PRIMARY_PANELS = [[("matrix", "speed"), ("sweep", "speed"), ("alphabet", "speed")],
                  [("length", "length_8"), ("length", "length_12"), ("sweep", "length_8"),
                   ("sweep", "length_12"), ("alphabet", "length_8")]]
"""The results chapter's forest of the primary endpoints (`decision_forest`'s `columns`):
speed in one column, generalisation in the other."""


# ---------------------------------------------------------------- forest of the primary endpoints

def _scale(metric: str):
    return (lambda x: x) if is_ratio(metric) else (lambda x: 100 * x)


def panel_limits(rows: pd.DataFrame, metric: str) -> tuple[float, float]:
    """x limits holding every interval and the margin of `rows`, with some room: a ratio
    panel (log axis) pads by a factor, an accuracy panel (points) by a fixed amount."""
    f = _scale(metric)
    ends = [f(x) for x in (*rows.ci_low, *rows.ci_high, *rows.margin_low, *rows.margin_high)
            if np.isfinite(x)]
    if is_ratio(metric):
        ends += [1.0]
        lo, hi = min(ends), max(ends)
        return lo / 1.3, hi * 1.3
    ends += [0.0]
    lo, hi = min(ends), max(ends)
    return lo - 6, hi + 6


def ratio_ticks(lo: float, hi: float) -> list[float]:
    """Plain ratio ticks inside (lo, hi): 0.5, 1, 2, ...; finer ones on a narrow axis."""
    ticks = [t for t in RATIO_TICKS if lo <= t <= hi]
    if len(ticks) < 3:
        ticks = sorted(set(ticks) | {t for t in FINE_RATIO_TICKS if lo <= t <= hi})
    return ticks


def plain(x: float) -> str:
    """A tick label as a reader writes it: 0.5, 1, 2, −25, 1,000 (no 10⁰, no hyphen minus)."""
    return plain_number(x)


def arm_name(name: str) -> str:
    """A row's name as the figures print it: `rope_theta=10,000` reads `base 10,000`."""
    return "base " + name.removeprefix("rope_theta=") if name.startswith("rope_theta=") else name


def _format_axis(ax, metric: str, limits) -> None:
    ax.set_xlim(*limits)
    if is_ratio(metric):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(mticker.FixedLocator(ratio_ticks(*limits)))
        ax.xaxis.set_minor_locator(mticker.NullLocator())
        ax.set_xlabel("control / reference (below 1: control sooner)")
    else:
        ax.xaxis.set_major_locator(mticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.set_xlabel("control − reference (points)")
    ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda x, _: plain(x)))


def forest_axes(ax, rows: pd.DataFrame, metric: str, limits, title: str | None = None) -> set[str]:
    """One panel: a row per comparison, its effect and interval coloured by verdict, the
    margin shaded, the no-difference line. Returns the verdicts drawn."""
    f = _scale(metric)
    drawn = set()
    y = np.arange(len(rows))[::-1]
    ax.axvspan(f(rows.margin_low.iloc[0]), f(rows.margin_high.iloc[0]), color=MARGIN_COLOR, lw=0, zorder=0)
    ax.axvline(1.0 if is_ratio(metric) else 0.0, color="black", lw=0.8, zorder=1)
    for yi, r in zip(y, rows.itertuples()):
        if not np.isfinite(r.effect):
            centre = math.sqrt(limits[0] * limits[1]) if is_ratio(metric) else sum(limits) / 2
            ax.text(centre, yi, "every row at chance", ha="center", va="center",
                    fontsize=8, style="italic", color=CHANCE_COLOR)
            continue
        color = COLORS[r.verdict]
        ax.hlines(yi, f(r.ci_low), f(r.ci_high), color=color, lw=2.0, zorder=2)
        ax.plot(f(r.effect), yi, "o", color=color, ms=4.5, zorder=3)
        drawn.add(r.verdict)
    ax.set_yticks(y)
    ax.set_yticklabels([row_label(r) for r in rows.itertuples()], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="y", visible=False)
    _format_axis(ax, metric, limits)
    if title:
        ax.set_title(title, fontsize=9.5, loc="left")
    return drawn


def forest_legend(fig, verdicts: set[str]):
    """The legend of what a forest draws: the verdicts drawn, the margin, the null line."""
    order = ["better", "worse", "equivalent", "undecided", "rarely solved", "mostly at chance",
             "both at chance"]
    handles = [Line2D([], [], color=COLORS[v], marker="o", lw=2.0, ms=4.5, label=v)
               for v in order if v in verdicts]
    handles += [Patch(color=MARGIN_COLOR, label=MARGIN_LABEL),
                Line2D([], [], color="black", lw=0.8, label=NULL_LABEL)]
    return fig.legend(handles=handles, loc="lower center", ncol=len(handles), bbox_to_anchor=(0.5, 0.0),
                      fontsize=8.5)


def decision_forest(decisions: pd.DataFrame, columns, width: float = 10.0):
    """The primary endpoints as small multiples. `columns` lists, per column of panels,
    the (measurement, endpoint) pairs it stacks; a column shares one x axis (so effects
    compare across its panels) that holds every interval of the column."""
    use_book_style()
    sizes = [[int(((decisions.measurement == m) & (decisions.metric == e)).sum()) for m, e in col]
             for col in columns]
    tallest = max(sum(s) + 2.2 * len(s) for s in sizes)
    fig = plt.figure(figsize=(width, 0.19 * tallest + 1.2), layout="constrained")
    subs = fig.subfigures(1, len(columns), wspace=0.04)
    subs = np.atleast_1d(subs)
    drawn: set[str] = set()
    for sub, col, size in zip(subs, columns, sizes):
        ratios = [s + 2.2 for s in size]
        pad = tallest - sum(ratios)
        axes = sub.subplots(len(col) + (pad > 0.5), 1, height_ratios=ratios + ([pad] if pad > 0.5 else []))
        axes = np.atleast_1d(axes)
        metric = col[0][1]
        picked = [decisions[(decisions.measurement == m) & (decisions.metric == e)] for m, e in col]
        limits = panel_limits(pd.concat(picked), metric)
        for ax, (m, e), rows in zip(axes, col, picked):
            drawn |= forest_axes(ax, rows, e, limits, f"{METRIC_TITLES[e]}: {MEASUREMENT_TITLES[m]}")
        for ax in axes[len(col):]:
            ax.set_axis_off()
    fig.get_layout_engine().set(h_pad=0.06)
    forest_legend(fig, drawn)
    fig.set_figheight(fig.get_figheight() + 0.35)
    fig.get_layout_engine().set(rect=(0, 0.045, 1, 0.955))
    return fig


# ---------------------------------------------------------------- time to solve

def share_solved(solve_steps, grid) -> np.ndarray:
    """The share of runs solved by each step of `grid`: a run with solve step s counts
    from s on; an unsolved run (NaN) never does. Every run is observed up to the cap, so
    this is the empirical distribution of the capped time to solve (Kaplan–Meier without
    censoring before the cap gives the same curve)."""
    s = np.asarray(solve_steps, dtype=float)
    if s.size == 0:
        raise ValueError("no runs")
    grid = np.asarray(grid, dtype=float)
    return (s[None, :] <= grid[:, None]).sum(axis=1) / s.size


def solve_curves_figure(cells: dict, cap: float, reference: str = "reference", colors: dict | None = None,
                        notes: dict | None = None, panel: tuple[float, float] = (1.45, 1.25)):
    """A grid of panels, each the share of seeds solved by step for the reference and one
    control. `cells` maps (row title, column title) -> (reference solve steps, control
    solve steps), NaN where a run never solved; the control of a column is named by its
    title. `notes` maps a cell to a short text (its verdict) written in the panel. No
    cells (a reader's short run may leave none to draw): None, which `show` skips."""
    if not cells:
        return None
    grid = np.linspace(0.0, cap, 97)

    def draw(ax, cell, colour):
        ref, ctl = cells[cell]
        ax.step(grid, 100 * share_solved(ref, grid), where="post", **REFERENCE_STYLE)
        ax.step(grid, 100 * share_solved(ctl, grid), where="post", color=colour, lw=1.6)
        if notes and cell in notes:  # above the 100 % line, where no curve goes
            ax.text(0.03, 0.98, notes[cell], transform=ax.transAxes, ha="left", va="top", fontsize=7.5,
                    color=CHANCE_COLOR)

    handles = [Line2D([], [], label=reference, **REFERENCE_STYLE),
               Line2D([], [], color=NEUTRAL, lw=1.6, label="control (the column's, in its colour)")]
    return step_panel_grid(cells, cap, 125, "solved (%)", panel, draw, handles, colors)


def matrix_speed_cells(decisions: pd.DataFrame, runs: pd.DataFrame) -> tuple[dict, dict, dict]:
    """`solve_curves_figure`'s (cells, notes, colors) for the matrix's speed rows: a panel per
    task and regime (a row of panels) and control (a column, in the control's colour), each
    the two arms' solve steps seed by seed and the row's verdict; a row `not learned` has no
    arms and is left out. Empty when a reader's short run leaves no matrix row to draw."""
    rows = decisions[(decisions.measurement == "matrix") & (decisions.metric == "speed")
                     & (decisions.verdict != "not learned")]
    cells, notes, colors = {}, {}, {}
    for r in rows.itertuples():
        key = (f"{r.task}, {r.regime}", r.control)
        pair = paired_values(runs, r, "solve_step")
        cells[key], notes[key] = (pair.reference, pair.control), r.verdict
        colors[r.control] = variant_color(r.control)
    return cells, notes, colors


def recall_speed_cells(decisions: pd.DataFrame, runs: pd.DataFrame) -> tuple[dict, dict, dict]:
    """The same for the speed rows of the rotation sweep (each base against 10,000) and the
    answer alphabet (copy answers against name answers), all recall on the finite set: one
    row of panels, a column per comparison, coloured from the palette in turn (every arm of
    the sweep is `llama`, so a variant's colour would not tell them apart)."""
    rows = decisions[decisions.measurement.isin(["sweep", "alphabet"]) & (decisions.metric == "speed")]
    cells, notes, colors = {}, {}, {}
    for i, r in enumerate(rows.itertuples()):
        key = ("recall, finite", row_label(r).replace("copy vs name ", "copy "))
        pair = paired_values(runs, r, "solve_step")
        cells[key], notes[key] = (pair.reference, pair.control), r.verdict
        colors[key[1]] = PALETTE[(3, 1, 2)[i % 3]]
    return cells, notes, colors


def matrix_speed_figure(decisions: pd.DataFrame, runs: pd.DataFrame, cap: float):
    """The share of seeds solved by each step for the matrix's speed rows, each control
    against llama (`matrix_speed_cells`); None when there is no row to draw."""
    cells, notes, colors = matrix_speed_cells(decisions, runs)
    return solve_curves_figure(cells, cap, "reference: llama", colors, notes)


def recall_speed_figure(decisions: pd.DataFrame, runs: pd.DataFrame, cap: float):
    """The same for the rotation sweep and the answer alphabet (`recall_speed_cells`)."""
    cells, notes, colors = recall_speed_cells(decisions, runs)
    return solve_curves_figure(cells, cap, "reference: base 10,000, or name answers", colors, notes)


# ---------------------------------------------------------------- per-seed strips

def seed_strip_panels(runs: pd.DataFrame, rows, cap: float) -> list[dict]:
    """`seed_strip_figure`'s panels for decision rows: each row's endpoint, seed by seed,
    titled by the row's label, endpoint and verdict, in the control's colour; a speed row
    on a log axis of steps with the cap drawn, an accuracy row with its chance floor."""
    panels = []
    for r in rows:
        ep = ENDPOINTS[r.metric]
        pair = paired_values(runs, r, ep.column)
        panel = {"title": f"{row_label(r)}\n{SHORT_TITLES[r.metric]}: {r.verdict}",
                 "reference": r.reference, "control": r.control, "ref": pair.reference, "ctl": pair.control,
                 "color": variant_color(r.control_arm[1])}
        if ep.log:
            panel |= {"log": True, "cap": cap, "ylabel": "steps to solve (capped)"}
        else:
            panel |= {"chance": chance_floor(r.task, ep.n_pairs), "ylabel": "accuracy (%)"}
        panels.append(panel)
    return panels


def seed_strip_figure(panels: list[dict], width: float = 10.0):
    """Per-seed values of a few comparisons, one panel each: the reference's seeds at the
    left, the control's at the right, each seed's two runs joined by a faint line and the
    two medians by a thick one (forty seeds' lines are a texture; the medians say which way
    the row moved).

    A panel is a dict with `title`, `reference`/`control` (labels), `ref`/`ctl` (values
    per seed, same order), `ylabel`, and optionally `log` (a log axis with plain ticks),
    `chance` (an accuracy floor, as a fraction; values are then drawn in percent) and
    `cap` (a dotted line at the cap of steps)."""
    use_book_style()
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 3.5), squeeze=False, layout="constrained")
    for ax, p in zip(axes[0], panels):
        scale = 100.0 if "chance" in p else 1.0
        ref, ctl = np.asarray(p["ref"], float) * scale, np.asarray(p["ctl"], float) * scale
        if ref.shape != ctl.shape:
            raise ValueError("a strip needs one reference and one control value per seed")
        for a, b in zip(ref, ctl):
            ax.plot([0, 1], [a, b], color=NEUTRAL, lw=0.7, alpha=0.35, zorder=2)
        ax.scatter(np.zeros(len(ref)), ref, s=20, color="black", alpha=0.7, lw=0, zorder=3)
        ax.scatter(np.ones(len(ctl)), ctl, s=20, color=p.get("color", PALETTE[3]), alpha=0.7, lw=0, zorder=3)
        ax.plot([0, 1], [np.median(ref), np.median(ctl)], color="black", lw=2.4, marker="D", ms=6, zorder=4)
        ax.set_xticks([0, 1])
        # a name of two words on two lines: "base 10,000" beside "base 1,000,000" fits a panel
        ax.set_xticklabels([arm_name(p[k]).replace(" ", "\n", 1) for k in ("reference", "control")],
                           fontsize=8.5)
        ax.set_xlim(-0.4, 1.4)
        ax.set_title(p["title"], fontsize=9)
        ax.set_ylabel(p["ylabel"], fontsize=8.5)
        if p.get("log"):
            ax.set_yscale("log")
            values = np.concatenate([ref, ctl])
            lo, hi = values.min() / 1.3, values.max() * 1.3
            ax.set_ylim(lo, hi)
            ticks = [t for t in STEP_TICKS if lo <= t <= hi]
            ax.yaxis.set_major_locator(mticker.FixedLocator(ticks))
            ax.yaxis.set_minor_locator(mticker.NullLocator())
            ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        if "cap" in p:
            ax.axhline(p["cap"], color=CHANCE_COLOR, lw=0.9, ls=":", zorder=1)
            margin_label(ax, p["cap"], "cap")
        if "chance" in p:
            ax.set_ylim(-3, 103)
            chance_line(ax, p["chance"])
    handles = [Line2D([], [], color=NEUTRAL, lw=0.7, alpha=0.6, label="one seed's two runs"),
               Line2D([], [], color="black", lw=2.4, marker="D", ms=6, label="the two medians")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8.5)
    return fig


# ---------------------------------------------------------------- an interval by inversion

def inversion_figure(shifts, pvalues, level: float, interval: tuple[float, float], xlabel: str):
    """The two-sided p of the shifted differences against the shift, the row's level as a
    line and the interval (the shifts not rejected) shaded: its ends are where p crosses."""
    use_book_style()
    fig, ax = plt.subplots(figsize=(7.0, 2.8), layout="constrained")
    ax.axvspan(interval[0], interval[1], color=MARGIN_COLOR, lw=0, label="interval (not rejected)")
    ax.step(shifts, pvalues, where="mid", color=PALETTE[0], lw=1.4, label="two-sided p of the shifted data")
    ax.axhline(level, color=PALETTE[3], lw=1.0, ls="--", label="the row's level")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(lambda y, _: plain(y))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("p")
    ax.xaxis.set_major_formatter(lambda x, _: plain(x))
    legend_outside(ax, fontsize=8)  # inside, it would cover the shaded interval
    return fig


__all__ = ["decision_forest", "forest_axes", "panel_limits", "ratio_ticks", "plain", "arm_name",
           "PRIMARY_PANELS", "share_solved", "solve_curves_figure", "matrix_speed_cells",
           "recall_speed_cells", "matrix_speed_figure", "recall_speed_figure", "seed_strip_figure",
           "seed_strip_panels", "inversion_figure"]
