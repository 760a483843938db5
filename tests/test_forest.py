"""The forest plot of every verdict: one row per comparison, a panel per metric, a marker
per regime at its effect, coloured by its verdict; effects off the time axis on its edge."""
import math

import matplotlib.colors as mcolors
import pandas as pd
import pytest

from llamanat_core import plotting


def verdict_rows():
    """A small verdict frame with a known answer: two matrix comparisons on addition (both
    regimes), a sweep comparison, and the awkward effects (∞, 0, NaN)."""
    inf = math.inf
    a = ("matrix", "abs_pos vs llama", "abs_pos", "addition")
    p = ("matrix", "postnorm vs llama", "postnorm", "addition")
    t = ("sweep", "rope_theta=10 vs rope_theta=10,000", "rope_theta=10", "recall")
    rows = [  # measurement, comparison, control, task + regime, metric, effect, low, high, verdict
        a + ("finite", "time_to_solve", 0.5, 0.4, 0.6, "better"),
        a + ("fresh", "time_to_solve", 0.25, 0.2, 0.4, "better"),
        a + ("finite", "test_acc@1200", 0.40, 0.2, 0.6, "better"),
        p + ("finite", "time_to_solve", inf, 2.0, inf, "worse"),
        p + ("fresh", "time_to_solve", 0.0, 0.0, inf, "undecided"),
        p + ("finite", "test_acc@1200", -0.02, -0.04, 0.03, "equivalent"),
        t + ("finite", "time_to_solve", math.nan, 0.0, inf, "undecided"),
        t + ("finite", "test_acc@1200", -0.01, -0.02, 0.0, "both at chance"),
    ]
    cols = ["measurement", "comparison", "control", "task", "regime", "metric", "effect", "ci_low",
            "ci_high", "verdict"]
    return pd.DataFrame(rows, columns=cols)


def markers(ax):
    """(x, y, marker, colour) of every point marker drawn on an axis."""
    out = []
    for ln in ax.get_lines():
        if ln.get_marker() not in (None, "None", "") and len(ln.get_xdata()) == 1:
            out.append((float(ln.get_xdata()[0]), float(ln.get_ydata()[0]), ln.get_marker(),
                        mcolors.to_hex(ln.get_color())))
    return out


def test_forest_draws_one_row_per_comparison_and_a_panel_per_metric():
    v = verdict_rows()
    fig = plotting.forest_figure(v, metrics=("time_to_solve", "test_acc"))
    time_ax, acc_ax = fig.axes[:2]
    assert [t.get_text() for t in time_ax.get_yticklabels()] == [
        "abs_pos · addition", "postnorm · addition", "base 10 vs base 10,000"]
    assert time_ax.get_xscale() == "log" and acc_ax.get_xscale() == "linear"
    pts = markers(time_ax)
    # abs_pos finite at ×0.5 (a circle, above the row), fresh at ×0.25 (a square, below), both "better"
    green = plotting.VERDICT_COLORS["better"].lower()
    assert (0.5, -0.16, "o", green) in [(x, round(y, 2), m, c) for x, y, m, c in pts]
    assert (0.25, 0.16, "s", green) in [(x, round(y, 2), m, c) for x, y, m, c in pts]
    # ∞ sits on the right edge as a right triangle, 0 on the left edge as a left one
    lo, hi = plotting.RATIO_LIMITS
    assert (hi, ">") in [(x, m) for x, _, m, _ in pts] and (lo, "<") in [(x, m) for x, _, m, _ in pts]
    # an undefined ratio (NaN) has no marker on its row, only its interval
    assert not [p for p in pts if round(p[1]) == 2]
    # accuracy gaps are in points, coloured by verdict
    acc = {(round(x, 6), c) for x, _, _, c in markers(acc_ax)}
    assert (40.0, green) in acc and (-2.0, plotting.VERDICT_COLORS["equivalent"].lower()) in acc
    assert (-1.0, plotting.VERDICT_COLORS["both at chance"].lower()) in acc
    assert plotting.png_bytes(fig) == plotting.png_bytes(fig)


def test_forest_rejects_what_it_cannot_draw():
    with pytest.raises(ValueError, match="no verdicts to draw"):
        plotting.forest_figure(verdict_rows().iloc[0:0])
    with pytest.raises(ValueError, match="unknown metric"):
        plotting.forest_figure(verdict_rows(), metrics=("final_loss",))
    with pytest.raises(ValueError, match="no verdicts for metrics"):
        plotting.forest_figure(verdict_rows(), metrics=("test_acc_12",))
