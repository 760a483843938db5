"""The report module on constructed frames (seed tables, number formatting for tables and
prose, chance labels, what `glue_all` publishes) and the shared figures of `plotting`."""
from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import report, stats


def frame(values: dict, task: str = "recall", step: int = 1200, column: str = "variant") -> pd.DataFrame:
    """Tidy rows, one per (row, seed): {row: [value per seed]} at one final checkpoint."""
    rows = [{column: k, "seed": s, "task": task, "step": step, "final": True, "test_acc": v,
             "val_loss": 1.0 - v}
            for k, vals in values.items() for s, v in enumerate(vals)]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ seed tables

def test_seed_table_mean_population_std_and_every_seed():
    t = report.seed_table(frame({"a": [0.2, 0.4, 0.6], "b": [1.0, 1.0, 1.0]}), order=["b", "a"])
    assert list(t.index) == ["b", "a"]
    assert t.loc["a", "mean"] == pytest.approx(0.4)
    assert t.loc["a", "std"] == pytest.approx(np.std([0.2, 0.4, 0.6]))  # ddof=0
    assert t.loc["b", "std"] == 0
    assert list(t.columns) == ["mean", "std", "n", "seed 0", "seed 1", "seed 2"]
    assert t.loc["a", "seed 2"] == pytest.approx(0.6) and t.loc["a", "n"] == 3


def test_seed_table_reads_the_final_checkpoint_unless_a_step_is_named():
    df = pd.concat([frame({"a": [0.1, 0.2]}, step=300).assign(final=False),
                    frame({"a": [0.9, 1.0]}, step=1200)])
    assert report.seed_table(df).loc["a", "mean"] == pytest.approx(0.95)
    assert report.seed_table(df, step=300).loc["a", "mean"] == pytest.approx(0.15)
    with pytest.raises(ValueError, match="no checkpoint at step 600"):
        report.seed_table(df, step=600)


def test_seed_table_refuses_two_rows_per_seed():
    df = pd.concat([frame({"a": [0.1, 0.2]}), frame({"a": [0.3, 0.4]})])
    with pytest.raises(ValueError, match="several rows"):
        report.seed_table(df)


# ------------------------------------------------------------------ tables

def test_thousands_formats_integer_columns_only():
    df = pd.DataFrame({"parameters": [102528, 36864], "share": [0.5, 0.25], "name": ["x", "y"],
                       "flag": [True, False]})
    out = report.thousands(df)
    assert list(out["parameters"]) == ["102,528", "36,864"]
    assert list(out["share"]) == [0.5, 0.25] and list(out["flag"]) == [True, False]
    assert list(df["parameters"]) == [102528, 36864]  # the input is not changed


# ------------------------------------------------------------------ chance

@pytest.mark.parametrize("floor, label", [(1 / 4, "1/4"), (1 / 12, "1/12"), (1 / 1000, "1/1,000")])
def test_chance_label_writes_a_floor_as_a_fraction(floor, label):
    """(the floors themselves are stats.chance_floor's, tested there)"""
    assert report.chance_label(floor) == label


def test_chance_label_rejects_what_is_not_one_in_n():
    with pytest.raises(ValueError, match="not one chance in a whole number"):
        report.chance_label(0.3)


# ------------------------------------------------------------------ numbers in prose

def test_within_is_the_power_of_ten_above_a_rounding_difference():
    """The same bound for the digits two CPUs give one check (2.3e-09 and 2.8e-09)."""
    assert report.within(2.3e-9) == report.within(2.8e-9) == "10⁻⁸"
    assert report.within(2.4e-7) == report.within(-3.6e-7) == "10⁻⁶"
    assert report.within(1e-6) == "10⁻⁶" and report.within(1.1e-6) == "10⁻⁵"
    assert report.within(0.0) == "0" and report.within(20.0) == "10²"


def test_below_hides_the_digits_of_rounding_only():
    """0 on one CPU, 7.45e-9 on another: both print as the bound; a real difference not."""
    assert report.below(0.0) == report.below(7.45e-9) == report.below(-9.9e-7) == "< 10⁻⁶"
    assert report.below(2.4e-6) == "2.4 × 10⁻⁶" and report.below(1.38) == "1.4"
    assert report.below(3e-9, bound=1e-8) == "< 10⁻⁸"


def test_sci_for_prose():
    assert report.sci(2.4e-7) == "2.4 × 10⁻⁷"
    assert report.sci(0) == "0"
    assert report.sci(9.96e-3) == "1.0 × 10⁻²"
    assert report.sci(3.0) == "3.0"
    assert report.pct(0.715) == "71.5%"
    assert report.pct(0.0123, 2) == "1.23%"


def test_glue_all_accepts_plain_values_only(monkeypatch):
    seen = {}
    monkeypatch.setattr(report, "_myst_glue",
                        lambda: lambda name, value, display=True: seen.update({name: value}))
    report.glue_all({"n": np.int64(5), "s": "text", "f": 0.5})
    assert seen == {"n": 5, "s": "text", "f": 0.5} and type(seen["n"]) is int
    with pytest.raises(TypeError, match="expected str/int/float"):
        report.glue_all({"bad": [1, 2]})
    report.glue_all({"neg": "-0.27", "ci": "[-3.5, -1]", "words": "4-pair items, 1e-3, 2026-12-04, -W"})
    assert seen["neg"] == "−0.27" and seen["ci"] == "[−3.5, −1]"
    assert seen["words"] == "4-pair items, 1e-3, 2026-12-04, -W"


def test_readable_tables_write_numbers_as_the_prose_does():
    table = pd.DataFrame({"x": [-0.3791, 0.00004, -0.00004], "n": [102528, -2, 7]},
                         index=pd.Index([-3.0, 0.0, 1.5], name="z"))
    out = report.readable(table, 3, index_digits=1)
    assert list(out.x) == ["−0.379", "0.000", "0.000"] and list(out.n) == ["102,528", "−2", "7"]
    assert list(out.index) == ["−3.0", "0.0", "1.5"] and out.index.name == "z"
    assert report.signed_number(-1234.5, 1) == "−1,234.5"
    # with `plus`, positives carry a sign; zero (after rounding) never does
    assert [report.signed_number(x, 1, plus=True) for x in (2.25, 1234.5, -0.04, 0.04)] == \
        ["+2.2", "+1,234.5", "0.0", "0.0"]


@pytest.mark.pool  # starts a Python (or dpkg) subprocess: not the inner loop
def test_glue_is_myst_nbs_without_the_iri_grammars():
    """In a new process (a chapter's kernel), gluing imports myst_nb's glue but not
    rfc3987_syntax (1.3 s of grammar compiling); nbformat still validates notebooks."""
    code = """
import sys
from llamanat_core.analysis import report
glue = report._myst_glue()
import myst_nb.ext.glue
assert glue is myst_nb.ext.glue.glue
assert "jsonschema" in sys.modules and "rfc3987_syntax" not in sys.modules
import nbformat
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
nbformat.validate(nb)
nb.cells[0]["outputs"] = "not a list"
try:
    nbformat.validate(nb)
except nbformat.ValidationError:
    print("validates")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "validates"


# ------------------------------------------------------------------ sentences that follow the data

def test_seed_range_text_writes_one_value_a_range_or_the_seeds_that_overflowed():
    assert report.seed_range_text([1.0, 1.0]) == "1 in every seed"
    assert report.seed_range_text([1.0, 2.0]) == "1.5 (seeds range 1 to 2)"
    assert report.seed_range_text([12345.0, 12345.4]) == "12,345 in every seed"
    assert report.seed_range_text([float("nan")] * 3) == "not finite in any of 3 seeds"
    assert report.seed_range_text([1.0, float("nan")]) == "1 in every seed, not finite in 1 of 2 seeds"


def test_overflow_text_says_where_and_in_how_many_seeds():
    assert report.overflow_text([None, None]) == "stays finite through every layer in all 2 seeds"
    assert report.overflow_text([5, float("nan"), 5]).endswith("at depth 5 in 2 of 3 seeds")
    assert report.overflow_text([3, 7]).endswith("between depth 3 and 7 in 2 of 2 seeds")


def _final_rows(accuracies: dict, step: int = 1200) -> pd.DataFrame:
    return pd.DataFrame([{"task": task, "regime": "finite", "variant": v, "seed": s, "step": step,
                          "test_acc": a}
                         for (task, v), accs in accuracies.items() for s, a in enumerate(accs)])


def test_split_rows_need_one_solved_seed_and_one_unsolved():
    rows = _final_rows({("recall", "llama"): [0.95, 0.30, 0.92],  # split
                        ("recall", "mha"): [0.95, 0.5, 0.92],  # 0.5 is between: not unsolved
                        ("addition", "llama"): [0.2, 0.25, 0.3]})  # no seed solved
    split = report.split_rows(rows)
    assert split.to_dict() == {("addition", "finite", "llama"): False, ("recall", "finite", "llama"): True,
                               ("recall", "finite", "mha"): False}
    assert report.split_rows(rows, low=0.5).loc[("recall", "finite", "mha")]  # the thresholds are read
    text = report.split_text(rows)
    assert text.startswith("In 1 of 3 rows of the matrix") and "90% or more at step 1,200" in text
    assert "40% or less" in text
    assert report.split_text(rows[rows.variant == "mha"]).startswith("No row of the matrix")
    with pytest.raises(ValueError, match="one step"):
        report.split_text(pd.concat([rows, _final_rows({("recall", "gelu"): [0.9]}, step=600)]))
    with pytest.raises(ValueError, match="low"):
        report.split_rows(rows, high=0.4, low=0.9)


def test_weights_checked_text_names_what_is_there():
    assert report.weights_checked_text(["recall", "addition"]).startswith("The committed reference weights")
    assert report.weights_checked_text([]).startswith("No trained reference weights")
    assert report.weights_checked_text(["addition"]) == (
        "Of the committed reference weights only the addition model is present; "
        "it is checked in the last row.")


def test_identical_tokens_text_counts_models_and_tokens():
    same = pd.DataFrame({"identical": [True, True], "tokens compared": [1000, 1500],
                         "tokens that differ": [0, 0]})
    assert report.identical_tokens_text(same) == (
        "All 2 models give identical tokens with and without the cache: 2,500 tokens compared, none differs.")
    same.loc[1, ["identical", "tokens that differ"]] = [False, 3]
    assert report.identical_tokens_text(same) == (
        "1 of 2 models give identical tokens with and without the cache; 3 of 2,500 tokens differ.")


def test_seed_list_text_writes_a_run_as_a_range_and_a_gap_as_a_list():
    assert report.seed_list_text(range(10)) == "0 to 9"
    assert report.seed_list_text([5, 0, 2]) == "0, 2, 5"
    assert report.seed_list_text([3]) == "3"
    assert report.seed_list_text([]) == "none"


def test_count_of_text_says_all_or_the_range():
    assert report.count_of_text([40, 40, 40], 40) == "all 40"
    assert report.count_of_text([40, 36, 39], 40) == "36 to 40 of 40"


def test_machine_text_leaves_out_a_load_not_recorded_and_counts_threads():
    m = {"cpu": "Some CPU", "cores": 8, "torch": "2.5.1", "threads": 1}
    assert report.machine_text(m) == "Some CPU (8 cores), torch 2.5.1, 1 thread"
    assert report.machine_text(m | {"threads": 2, "load_average_1min": 0.34}) == (
        "Some CPU (8 cores, load average 0.3 while measuring), torch 2.5.1, 2 threads")


# ------------------------------------------------------------------ figures (llamanat_core.book.plotting)

MIN_COLOUR_DISTANCE = 15  # CIE76 ΔE; about 2 is just noticeable


def colour_clashes(colours: dict[str, str]) -> list[str]:
    """Pairs of variants whose colours are equal or closer than MIN_COLOUR_DISTANCE in
    normal vision or any simulated deficiency."""
    from itertools import combinations

    from llamanat_core.book import plotting

    return [f"{a}/{b} {vision}" for (a, ca), (b, cb) in combinations(colours.items(), 2)
            for vision in plotting.VISIONS
            if plotting.colour_distance(ca, cb, vision) < MIN_COLOUR_DISTANCE]


def test_every_variant_has_its_own_colour_blind_safe_colour():
    from llamanat_core import VARIANTS
    from llamanat_core.book import plotting

    assert set(plotting.VARIANT_COLORS) == set(VARIANTS)  # every variant has a colour
    assert colour_clashes(plotting.VARIANT_COLORS) == []
    assert plotting.NEUTRAL not in plotting.VARIANT_COLORS.values()  # grey is "unlisted"
    # the check can fail: the earlier table gave layernorm and mha one orange, gelu_mlp
    # and bias one green, and a red beside a green of the same lightness
    earlier = dict(plotting.VARIANT_COLORS, mha=plotting.ORANGE, bias=plotting.GREEN)
    assert {"layernorm/mha normal", "gelu_mlp/bias normal"} <= set(colour_clashes(earlier))
    assert colour_clashes({"a": "#CC0000", "b": "#668800"}) == ["a/b deuteranopia"]


def test_colour_distance_is_cielab_and_simulates_the_deficiencies():
    from llamanat_core.book.plotting import colour_distance

    assert colour_distance("#000000", "#FFFFFF") == pytest.approx(100, abs=1e-3)
    assert colour_distance("#0072B2", "#0072B2", "tritanopia") == 0
    # red and green of one lightness: far apart in normal vision, nearly one colour to a
    # deuteranope, still apart to a tritanope (blue-yellow)
    assert colour_distance("#CC0000", "#668800") > 90
    assert colour_distance("#CC0000", "#668800", "deuteranopia") < 5
    assert colour_distance("#CC0000", "#668800", "tritanopia") > 90


def test_seed_points_draws_chance_and_joins_paired_seeds():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    plotting.use_book_style()
    t = report.seed_table(frame({"a": [0.9, 0.3, 0.5], "b": [0.8, 0.25, 0.7]}))
    fig, ax = plt.subplots()
    plotting.seed_points(ax, t, chance=stats.chance_floor("recall", 4))
    joins = [ln for ln in ax.lines if len(ln.get_xdata()) == 2 and ln.get_linestyle() == "-"]
    assert len(joins) == 3  # one line per seed across the two rows
    floors = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    assert len(floors) == 1 and floors[0].get_ydata()[0] == pytest.approx(25.0)
    assert any(txt.get_text() == "chance 1/4" for txt in ax.texts)
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.seed_points(ax, t, paired=False)
    assert not [ln for ln in ax.lines if ln.get_linestyle() == "-"] and not ax.texts
    plt.close(fig)


def test_seed_curves_put_the_legend_outside_the_axes():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    df = pd.concat([frame({"llama": [0.2, 0.3]}, step=300).assign(final=False),
                    frame({"llama": [0.8, 0.9]}, step=600)])
    fig, ax = plt.subplots()
    plotting.seed_curves(ax, df, "variant", chance=stats.chance_floor("recall"))
    legend = ax.get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1
    plt.close(fig)


def test_accuracy_grid_is_a_panel_per_task_and_regime_with_its_floor():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    plotting.use_book_style()
    tables = {(t, r): report.seed_table(frame({"llama": [0.9, 0.5], "mha": [0.8, 0.4]}, task=t))
              for t in ("addition", "recall") for r in ("finite", "fresh")}
    fig = plotting.accuracy_grid(tables, 1200, figsize=(9, 6.4))
    axes = fig.get_axes()
    assert tuple(fig.get_size_inches()) == (9, 6.4) and len(axes) == 4
    assert [ax.get_title() for ax in axes] == [
        "addition, finite data: step 1,200", "addition, fresh data: step 1,200",
        "recall, finite data: step 1,200", "recall, fresh data: step 1,200"]
    floors = [[ln.get_ydata()[0] for ln in ax.lines if ln.get_linestyle() == ":"] for ax in axes]
    assert floors == [[pytest.approx(0.1)]] * 2 + [[pytest.approx(25.0)]] * 2
    plt.close(fig)


def test_length_panels_draw_each_regime_against_pairs_with_a_falling_floor():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    rows = [{"regime": r, "variant": v, "seed": s, "pairs": n, "accuracy": acc}
            for r in ("finite", "fresh") for v in ("llama", "abs_pos") for s in (0, 1)
            for n, acc in ((4, 0.9), (8, 0.5), (12, 0.3))]
    data = pd.DataFrame(rows)
    fig = plotting.length_panels(data[~((data.regime == "fresh") & (data.variant == "abs_pos"))],
                                 "step 1,200", ["llama", "abs_pos"])
    finite, fresh = fig.get_axes()
    assert finite.get_title() == "finite data: step 1,200" and fresh.get_title() == "fresh data: step 1,200"
    for ax in (finite, fresh):
        (floor,) = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
        assert list(floor.get_xdata()) == [4, 8, 12]
        assert list(floor.get_ydata()) == pytest.approx([25.0, 12.5, 100 / 12])
    # a mean line per variant present: two in the finite panel, one in the fresh one
    means = [[ln for ln in ax.lines if ln.get_marker() == "o"] for ax in (finite, fresh)]
    assert [len(m) for m in means] == [2, 1]
    assert [t.get_text() for t in fresh.get_legend().get_texts()] == ["llama", "chance (1/pairs)"]
    plt.close(fig)


PLAIN = re.compile(r"^\u2212?\d{1,3}(,\d{3})*(\.\d+)?$")  # 0.001, 5, 1,000, −25: a number as written


@pytest.mark.parametrize("x, text", [(0.001, "0.001"), (0.30000000000000004, "0.3"), (5.0, "5"),
                                     (1000.0, "1,000"), (-25.0, "\u221225"), (1e6, "1,000,000")])
def test_plain_number_writes_a_tick_as_a_reader_would(x, text):
    from llamanat_core.book import plotting

    assert plotting.plain_number(x) == text


@pytest.mark.parametrize("lo, hi", [(0.02, 1.2), (0.004, 8000.0), (0.6, 25.0)])
def test_plain_ticks_leave_no_power_of_ten_on_a_log_axis(lo, hi):
    """Matplotlib's own log labels read 10⁰ and, on a short axis, 6×10⁰; plain_ticks writes
    numbers, at least three of them, and no minor labels."""
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [lo, hi])
    ax.set_yscale("log")
    plotting.plain_ticks(ax, "y")
    fig.canvas.draw()
    lo_view, hi_view = ax.get_ylim()
    shown = [t.get_text() for t in ax.get_yticklabels()
             if t.get_text() and lo_view <= t.get_position()[1] <= hi_view]
    assert len(shown) >= 3 and all(PLAIN.match(x) for x in shown), shown
    assert not any(t.get_text() for t in ax.get_yticklabels(minor=True))
    plt.close(fig)


def test_png_bytes_of_a_figure_are_the_same_on_every_call():
    """A constrained layout over shared axes moves a little at each draw; png_bytes lays a
    figure out once, so a test comparing two renders of one figure compares like with like."""
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    plotting.use_book_style()
    fig, axes = plt.subplots(2, 2, sharex=True, sharey=True, layout="constrained")
    for ax in axes.flat:
        ax.plot([100, 1000], [0.1, 3])
    fig.suptitle("shared axes")
    first = plotting.png_bytes(fig)
    assert plotting.png_bytes(fig) == first == plotting.png_bytes(fig)
    plt.close(fig)


def test_chance_label_sits_outside_the_axes_beside_its_line():
    """A label inside the axes can land on a point at chance (it did, in the sweep chapter)."""
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.scatter([0.95, 1.0], [12.0, 13.0])  # points at the right end, on the line
    plotting.chance_line(ax, 1 / 8)
    fig.canvas.draw()
    (label,) = ax.texts
    box, frame = label.get_window_extent(), ax.get_window_extent()
    assert label.get_text() == "chance 1/8"
    assert box.x0 >= frame.x1  # right of the axes
    _, y = ax.transData.transform((0, 12.5))
    assert box.y0 <= y <= box.y1  # beside the line it names
    plt.close(fig)


def _loss_curves(solved_seeds=(0,), seeds=range(4), steps=range(100, 1300, 100)):
    """Loss curves of one variant on recall in both regimes: the solved seeds stop early."""
    rows = []
    for regime in ("finite", "fresh"):
        for s in seeds:
            solved = regime == "fresh" and s in solved_seeds
            for step in steps[: 6 + s] if solved else steps:
                rows.append({"variant": "llama", "task": "recall", "answer": "name", "rope_theta": 10_000.0,
                             "regime": regime, "seed": s, "step": step, "censored": not solved,
                             "train_loss": 2.0 / (1 + step / 500 + s), "val_loss": 1.5 + s / 10})
    return pd.DataFrame(rows)


def test_loss_figure_draws_seeds_faint_two_medians_a_panel_and_names_only_what_it_draws():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    curves = _loss_curves()
    fig = plotting.loss_figure(curves, "llama", "recall", hline=math.log(4), hline_label="ln 4")
    axes = fig.get_axes()
    assert len(axes) == 4  # solved and unsolved × finite and fresh
    titles = [ax.get_title() for ax in axes]
    assert titles == ["finite data: 0 of 4 seeds solved", "fresh data: 1 of 4 seeds solved",
                      "finite data: 4 of 4 seeds unsolved", "fresh data: 3 of 4 seeds unsolved"]
    fig.canvas.draw()
    for ax in axes:
        data = [ln for ln in ax.get_lines() if ln.get_linestyle() != ":"]
        thick = [ln for ln in data if ln.get_linewidth() >= 2]
        assert len(thick) <= 2  # a training and a validation median at most
        assert all((ln.get_alpha() or 1) <= 0.35 for ln in data if ln not in thick)  # every seed faint
    for ax in axes[::2]:  # the left column carries the shared axis's labels
        shown = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert shown and all(PLAIN.match(x) for x in shown), shown
    empty = axes[0]
    assert [ln.get_linestyle() for ln in empty.get_lines()] == [":"]  # ln 4 alone
    assert [t.get_text() for t in empty.texts] == ["no seed solved"]
    # the fresh solved panel's medians stop where its first seed stops
    median = [ln for ln in axes[1].get_lines() if ln.get_linewidth() >= 2][0]
    assert max(median.get_xdata()) == 600
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "training loss, median", "validation loss, median", "one seed", "ln 4"]
    plt.close(fig)
    fig = plotting.loss_figure(curves, "llama", "recall")  # no line drawn, none named
    assert "ln 4" not in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)


def test_early_loss_figure_draws_each_group_faint_and_its_median_up_to_the_step_asked():
    import matplotlib.pyplot as plt

    from llamanat_core.book import plotting

    finite = _loss_curves()
    finite = finite[finite.regime == "finite"]
    curves = pd.concat([finite, finite.assign(answer="copy", train_loss=finite.train_loss / 2)])
    colors = {"name": plotting.BLUE, "copy": plotting.ORANGE}
    fig = plotting.early_loss_figure(curves, ["llama"], "answer", colors, until=600,
                                     hline=math.log(4), hline_label="ln 4")
    (ax,) = fig.get_axes()
    data = [ln for ln in ax.get_lines() if ln.get_linestyle() != ":"]
    thick = [ln for ln in data if ln.get_linewidth() >= 2]
    assert [ln.get_color() for ln in thick] == [plotting.BLUE, plotting.ORANGE]  # one median a group
    assert len(data) - len(thick) == 2 * 4  # every seed of both groups, faint
    assert max(max(ln.get_xdata()) for ln in data) == 600  # nothing past `until`
    assert ax.get_yscale() == "linear"
    copy_median = thick[1].get_ydata()
    assert np.allclose(copy_median, thick[0].get_ydata() / 2)  # the copy group's own values
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "name, median", "copy, median", "one seed", "ln 4"]
    plt.close(fig)
    with pytest.raises(ValueError, match="abs_pos"):
        plotting.early_loss_figure(curves, ["abs_pos"], "answer", colors, until=600)


def test_and_list_joins_words_as_prose():
    assert report.and_list(["post-norm", "MHA"], start=True) == "Post-norm and MHA"
    assert report.and_list(["MHA matched"], start=True) == "MHA matched"
    assert report.and_list([3]) == "3"
    assert report.and_list(["a", "b"]) == "a and b"
    assert report.and_list(("a", "b", "c")) == "a, b and c"
    assert report.and_list([]) == "–" and report.and_list(iter([]), empty="none") == "none"


def test_span_is_a_range_with_an_en_dash_or_one_number():
    assert report.span(pd.Series([0.404, 0.123])) == "0.12–0.40"
    assert report.span(np.array([1.391, 1.394])) == "1.39"  # both ends round alike
    assert report.span([2.35, math.nan, 2.7], 1) == "2.4–2.7"  # NaN dropped
    assert report.span(pd.Series([], dtype=float)) == "–" and report.span([math.nan]) == "–"
    assert report.span([0.4, 0.6], 0, percent=True) == "40–60%"
    assert report.span([0.5, 0.501], 0, percent=True) == "50%"
    assert report.span(np.array([[0.1, 0.3], [0.2, 0.0]])) == "0.00–0.30"  # any shape


def test_integer_text_separates_thousands_and_refuses_a_fraction():
    assert [report.integer_text(x) for x in (0, 192, 102_528, 6_738_415_616.0)] == \
        ["0", "192", "102,528", "6,738,415,616"]
    with pytest.raises(ValueError, match="2.5"):
        report.integer_text(2.5)


def test_matrix_numbers_rows_and_columns_and_writes_infinity_and_minus_signs():
    import torch

    scores = torch.tensor([[2.0, float("-inf")], [-0.5, 1234.0]])
    table = report.matrix(scores, rows="query", columns="key", digits=1)
    assert table.index.name == "query" and table.columns.name == "key"
    assert table.values.tolist() == [["2.0", "−∞"], ["−0.5", "1,234.0"]]
    mask = report.matrix(torch.tensor([[True, False], [True, True]]), "query", "key")
    assert mask.values.tolist() == [["1", "0"], ["1", "1"]] and list(mask.columns) == [0, 1]


def test_the_text_windows_figure_draws_each_arm_at_one_two_and_four_windows():
    from llamanat_core.book.plotting import png_bytes, text_windows_figure, variant_color

    runs = pd.DataFrame({"label": ["llama", "llama", "base 10"], "loss_end": [1.0, 1.2, 1.1],
                         "loss_2x": [1.4, 1.6, 1.2], "loss_4x": [2.0, 2.2, 1.3]})
    fig = text_windows_figure(runs, {"llama": "llama", "base 10": "#D55E00", "base 100": "#009E73"}, 48)
    ax = fig.axes[0]
    means = [line for line in ax.get_lines() if line.get_linewidth() == 2.0]
    assert [m.get_label() for m in means] == ["llama (2 seeds)", "base 10 (1 seed)"]  # no base 100 runs
    assert list(means[0].get_xdata()) == [48, 96, 192]
    assert np.allclose(means[0].get_ydata(), np.array([1.1, 1.5, 2.1]) / math.log(2))  # bits, the mean
    assert means[1].get_color() == "#D55E00" and means[0].get_color() == variant_color("llama")
    again = text_windows_figure(runs, {"llama": "llama", "base 10": "#D55E00"}, 48)
    assert png_bytes(fig) == png_bytes(again)


def test_one_colour_per_verdict_kind():
    """Every verdict kind `decide` and the decision figures write has a colour of its own:
    no two share one, and each is told apart from the rest in normal vision."""
    from llamanat_core.analysis import comparisons
    from llamanat_core.book import plotting
    from llamanat_core.book.plotting import decisions

    kinds = {"better", "worse", "equivalent", "undecided", "both at chance",
             comparisons.RARELY_SOLVED, comparisons.MOSTLY_AT_CHANCE, "not learned"}
    assert kinds <= set(plotting.VERDICT_COLORS) and decisions.COLORS == plotting.VERDICT_COLORS
    colours = list(plotting.VERDICT_COLORS.values())
    assert len(set(colours)) == len(colours)
    normal = [c for c in colour_clashes(plotting.VERDICT_COLORS) if c.endswith(" normal")]
    assert normal == []
    # the check can fail: the earlier table gave both kinds of "too little to read" one colour
    earlier = dict(plotting.VERDICT_COLORS, **{comparisons.MOSTLY_AT_CHANCE: "#b09a6e"})
    assert len(set(earlier.values())) < len(earlier)
    assert "rarely solved/mostly at chance normal" in colour_clashes(earlier)
