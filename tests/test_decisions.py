"""The tables and figures of the study's decisions (`decision_tables`, `plotting.decisions`),
on constructed decision rows where the answer is known and on the committed study."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import decision_tables as dtab
from llamanat_core.book.plotting import decisions as dfig

PLAIN = re.compile(r"^\u2212?\d+(\.\d+)?$|^\u2212?\d{1,3}(,\d{3})+$")


def _row(measurement="matrix", control="abs_pos", task="addition", regime="finite", metric="speed",
         effect=0.34, lo=0.18, hi=0.57, verdict="better", stopped="decided on the first 10 seeds", **kw):
    ratio = metric == "speed"
    base = {"measurement": measurement, "comparison": f"{control} vs llama", "task": task, "regime": regime,
            "metric": metric, "primary": metric != "test_acc@1200", "reference": "llama", "control": control,
            "n": 10, "reference_value": 1683.0 if ratio else 0.8, "control_value": 566.0 if ratio else 0.3,
            "effect": effect, "ci_low": lo, "ci_high": hi,
            "margin_low": 0.8 if ratio else -0.15, "margin_high": 1.25 if ratio else 0.15,
            "p": 0.002, "p_holm": 0.0137, "level": 0.007, "test": "t", "verdict": verdict, "stopped": stopped,
            "prob_better": 1.0, "prob_better_low": 0.72, "prob_better_high": 1.0, "seeds_needed": math.nan,
            "reference_arm": (task, "llama", regime, 10000.0, "name"),
            "control_arm": (task, control, regime, 10000.0, "name")}
    base.update(kw)
    return base


@pytest.fixture
def decisions():
    return pd.DataFrame([
        _row(),
        _row(control="postnorm", effect=2.03, lo=1.13, hi=4.10, verdict="worse"),
        _row(control="mha", effect=1.01, lo=0.31, hi=9.5, verdict="undecided", seeds_needed=46122.0,
             stopped="undecided on the first 10 seeds: 0 of 30 added seeds so far", p_holm=math.nan),
        _row(measurement="length", metric="length_12", control="gelu_mlp", task="recall", effect=-0.545,
             lo=-0.745, hi=-0.185, verdict="worse"),
        _row(measurement="length", metric="length_12", control="mha", task="recall", effect=-0.01,
             lo=-0.05, hi=0.04, verdict="both at chance"),
        _row(measurement="length", metric="length_8", control="every control", task="recall", regime="fresh",
             effect=math.nan, lo=-0.1, hi=0.1, verdict="not learned"),
    ])


def test_effects_read_as_the_book_writes_them(decisions):
    rows = list(decisions.itertuples())
    assert dtab.decision_effect_text(rows[0]) == "×0.34 [0.18, 0.57]"
    assert dtab.decision_effect_text(rows[3]) == "\u221254.5 [\u221274.5, \u221218.5]"  # a real minus sign
    assert "-" not in dtab.decision_effect_text(rows[3])
    assert dtab.decision_effect_text(rows[5]) == "–"
    assert dtab.signed(-0.04, 1) == "0.0" and dtab.signed(3, 1) == "+3.0"


def test_row_facts_give_a_sentence_its_numbers_under_one_prefix(decisions):
    slow = pd.Series(_row(control="mqa", effect=1.336, lo=0.951, hi=2.096, verdict="undecided", n=40,
                          reference_solved=35.0, control_solved=28.0))
    assert dtab.row_facts(slow, "g") == {"g_n": "40", "g_effect": "×1.34", "g_interval": "[0.95, 2.10]",
                                         "g_ref": "35", "g_ctl": "28"}
    gap = dtab.row_facts(decisions.iloc[3], "x")  # accuracy: points with a real minus, no solve counts
    assert gap == {"x_n": "10", "x_effect": "\u221254.5", "x_interval": "[\u221274.5, \u221218.5]",
                   "x_gap": "54.5"}
    never = pd.Series(_row(effect=4.81, lo=1.0, hi=5.99, bound="lower", ci_low_ties=True, n=40,
                           reference_solved=32.0, control_solved=0.0))
    assert dtab.verdict_text(slow) == "undecided"
    assert dtab.verdict_text(pd.Series(_row(verdict="worse", post_hoc=True))) == "worse (post hoc)"
    facts = dtab.row_facts(never, "m")
    assert (facts["m_effect"], facts["m_interval"], facts["m_ctl"]) == ("≥×4.81", "[ties, 5.99]", "0")
    # a row with no test (both arms at chance, or a reader's one fresh seed): dashes, no error
    untested = pd.Series(_row(effect=np.nan, lo=np.nan, hi=np.nan, n=np.nan,
                              reference_solved=np.nan, control_solved=np.nan))
    assert dtab.row_facts(untested, "u") == {"u_n": "0", "u_effect": "–", "u_interval": "–",
                                             "u_ref": "–", "u_ctl": "–"}


def test_decision_table_formats_every_row(decisions):
    t = dtab.decision_table(decisions)
    assert len(t) == len(decisions)
    assert list(t["seeds needed"]) == ["–", "–", "46,122", "–", "–", "–"]  # thousands separated
    assert t["reference"].iloc[0] == "1,683" and t["reference"].iloc[3] == "80.0%"
    assert t["margin"].iloc[0] == "0.8–1.25" and t["margin"].iloc[3] == "±15"
    assert t["Holm p"].iloc[2] == "–" and t["Holm p"].iloc[0] == "0.014"
    assert list(t.columns) == dtab.OUTCOME + dtab.TEST
    only = dtab.decision_table(decisions, ["length_12"])
    assert set(only.index.get_level_values("endpoint")) == {"length_12"}


def test_no_public_name_has_two_homes():
    """One name, one home: what the two modules export is neither exported by the other
    nor a name in comparisons or the plotting package."""
    from llamanat_core.analysis import comparisons
    from llamanat_core.book import plotting

    for module, other in ((dtab, dfig), (dfig, dtab)):
        shared = {n for n in module.__all__
                  if hasattr(comparisons, n) or hasattr(plotting, n) or n in other.__all__}
        assert not shared, (module.__name__, shared)
        assert all(hasattr(module, n) for n in module.__all__), module.__name__


def test_decision_counts_add_up_and_count_pending_rows(decisions):
    c = dtab.decision_counts(decisions)
    assert c == {"total": 6, "better": 1, "worse": 2, "decided": 3, "equivalent": 0, "undecided": 1,
                 "at chance": 1, "not learned": 1, "rarely solved": 0, "mostly at chance": 0, "post hoc": 0,
                 "pending": 1}
    marked = decisions.assign(post_hoc=[False, True, False, False, False, False])
    c = dtab.decision_counts(marked)
    assert (c["worse"], c["decided"], c["post hoc"], c["total"]) == (1, 2, 1, 6)


def test_a_bound_and_an_end_made_by_ties_are_written_as_such():
    """A ratio where one arm never solves is a bound; an end that tied pairs put at no
    difference is not shown as a number; solved k of n leads every speed row."""
    never = pd.Series(_row(control="gelu_mlp", effect=3.53, lo=2.31, hi=5.31, verdict="rarely solved",
                           bound="lower", n=40, reference_solved=32, control_solved=0))
    assert dtab.decision_effect_text(never) == "≥×3.53 [2.31, 5.31]"
    assert dtab.decision_effect_text(never.copy().replace({"lower": "upper"})).startswith("≤×")
    tied = pd.Series(_row(effect=1.05, lo=1.0, hi=1.22, ci_low_ties=True, ci_high_ties=False))
    assert dtab.decision_effect_text(tied) == "×1.05 [ties, 1.22]"
    assert dtab.decision_effect_text(pd.Series(_row(effect=1.05, lo=1.0, hi=1.22))) == "×1.05 [1.00, 1.22]"
    assert dtab.solved_text(never) == "32/40 vs 0/40"
    assert dtab.solved_text(pd.Series(_row(metric="length_8", reference_solved=math.nan))) == "–"
    table = dtab.decision_table(pd.DataFrame([never.to_dict()]))
    assert table["solved (ref vs control)"].iloc[0] == "32/40 vs 0/40"


def _bars(ax):
    from matplotlib.collections import LineCollection

    return [seg for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]


def test_forest_bars_inside_panels_plain_ticks_and_legend_of_what_is_drawn(decisions):
    import matplotlib.pyplot as plt

    columns = [[("matrix", "speed")], [("length", "length_12"), ("length", "length_8")]]
    fig = dfig.decision_forest(decisions, columns)
    axes = [ax for ax in fig.axes if ax.axison]
    assert len(axes) == 3  # one panel per measurement × endpoint
    for ax in axes:
        lo, hi = ax.get_xlim()
        for seg in _bars(ax):
            xs = seg[:, 0]
            assert lo < xs.min() and xs.max() < hi, (ax.get_title(), xs, (lo, hi))
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert labels and all(PLAIN.match(x) for x in labels), labels
    speed = axes[0]
    assert speed.get_xscale() == "log"
    assert {t.get_text() for t in speed.get_xticklabels()} >= {"0.5", "1", "2"}
    (legend,) = fig.legends
    drawn = {t.get_text() for t in legend.get_texts()}
    assert drawn == {"better", "worse", "undecided", "both at chance", dfig.MARGIN_LABEL, dfig.NULL_LABEL}
    assert "equivalent" not in drawn  # nothing equivalent was drawn
    plt.close(fig)


def test_ratio_ticks_are_plain_and_inside():
    assert dfig.ratio_ticks(0.15, 5.0) == [0.2, 0.5, 1, 2, 5]
    narrow = dfig.ratio_ticks(0.7, 1.5)
    assert len(narrow) >= 3 and all(0.7 <= t <= 1.5 for t in narrow)
    assert dfig.plain(-25.0) == "\u221225" and dfig.plain(0.5) == "0.5" and dfig.plain(5000.0) == "5,000"


def test_share_solved_counts_runs_solved_by_each_step():
    steps = [100, 300, np.nan, 300]
    assert list(dfig.share_solved(steps, [0, 100, 200, 300, 4800])) == [0, 0.25, 0.25, 0.75, 0.75]
    with pytest.raises(ValueError):
        dfig.share_solved([], [0])


def test_solve_curves_have_at_most_two_curves_a_panel():
    import matplotlib.pyplot as plt

    cells = {("addition, finite", "abs_pos"): ([500, 1000, np.nan], [200, 300, 400]),
             ("addition, finite", "mha"): ([500, 1000, np.nan], [np.nan, np.nan, 900]),
             ("recall, fresh", "abs_pos"): ([np.nan] * 3, [np.nan] * 3)}
    fig = dfig.solve_curves_figure(cells, 4800, notes={k: "undecided" for k in cells})
    shown = [ax for ax in fig.axes if ax.axison]
    assert len(shown) == 3  # the empty cell of the grid is switched off
    for ax in shown:
        assert len(ax.get_lines()) == 2
        assert ax.get_xlim() == (0, 4800)
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 2
    plt.close(fig)


def test_seed_strip_joins_each_seed_faintly_and_the_medians_boldly():
    import matplotlib.pyplot as plt

    panels = [{"title": "a", "reference": "llama", "control": "abs_pos", "ref": [700, 1000, 4800],
               "ctl": [300, 500, 800], "ylabel": "steps", "log": True, "cap": 4800},
              {"title": "b", "reference": "llama", "control": "gelu", "ref": [0.8, 0.7],
               "ctl": [0.1, 0.09], "ylabel": "accuracy (%)", "chance": 1 / 12},
              {"title": "c", "reference": "rope_theta=10,000", "control": "rope_theta=10",
               "ref": [900, 1200], "ctl": [4800, 1500], "ylabel": "steps", "log": True, "cap": 4800}]
    fig = dfig.seed_strip_figure(panels)
    a, b, c = fig.axes
    joins = [line for line in a.get_lines()
             if list(line.get_xdata()) == [0, 1] and line.get_linestyle() == "-"]  # not the cap's line
    faint = [line for line in joins if line.get_linewidth() < 1 and (line.get_alpha() or 1) <= 0.5]
    (median,) = [line for line in joins if line not in faint]  # the one line drawn to be read
    assert len(faint) == 3  # one per seed
    assert list(median.get_ydata()) == [1000, 500]
    fig.canvas.draw()
    assert all(PLAIN.match(t.get_text()) for t in a.get_yticklabels() if t.get_text())
    assert b.get_ylim() == (-3, 103)
    # the sweep's long names are shortened, and the two names of a panel do not collide
    assert [t.get_text() for t in c.get_xticklabels()] == ["base\n10,000", "base\n10"]
    for ax in (a, b, c):
        left, right = (t.get_window_extent() for t in ax.get_xticklabels())
        assert left.x1 < right.x0, ax.get_title()
    # labels of lines sit right of the axes, off the points at the control's side
    for ax in (a, b):
        assert all(t.get_window_extent().x0 >= ax.get_window_extent().x1 for t in ax.texts)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["one seed's two runs", "the two medians"]
    with pytest.raises(ValueError):
        dfig.seed_strip_figure([dict(panels[0], ctl=[1, 2])])
    plt.close("all")


def test_inversion_figure_keeps_its_legend_off_the_interval():
    import matplotlib.pyplot as plt

    shifts = np.arange(-50, 51)
    fig = dfig.inversion_figure(shifts, np.exp(-(shifts / 20.0) ** 2), 0.05, (-35, 35), "shift")
    (ax,) = fig.axes
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "interval (not rejected)", "two-sided p of the shifted data", "the row's level"]
    assert all(PLAIN.match(t.get_text()) for t in ax.get_yticklabels() if t.get_text())
    plt.close(fig)


def test_paired_values_keeps_unsolved_runs():
    runs = pd.DataFrame({"run": ["a", "b", "c", "d"], "task": "addition",
                         "variant": ["llama", "llama", "x", "x"],
                         "regime": "finite", "rope_theta": 10000.0, "answer": "name", "seed": [0, 1, 0, 2],
                         "solve_step": [500.0, np.nan, np.nan, 300.0]})
    row = pd.Series({"reference_arm": ("addition", "llama", "finite", 10000.0, "name"),
                     "control_arm": ("addition", "x", "finite", 10000.0, "name")})
    pair = dtab.paired_values(runs, row, "solve_step")
    assert list(pair.index) == [0] and pair.loc[0, "reference"] == 500 and np.isnan(pair.loc[0, "control"])
    nobody = pd.Series({"reference_arm": np.nan, "control_arm": np.nan})  # "not learned": one row, no arms
    empty = dtab.paired_values(runs, nobody, "solve_step")
    assert empty.empty and list(empty.columns) == ["reference", "control"]


def test_an_arms_solves_count_each_run_once_out_of_its_seeds():
    runs = pd.DataFrame({"run": ["a", "a", "b", "c", "d", "e"], "task": "recall",
                         "variant": ["llama", "llama", "llama", "llama", "x", "llama"],
                         "regime": ["finite"] * 5 + ["fresh"], "rope_theta": 10000.0, "answer": "name",
                         "seed": [0, 0, 1, 2, 0, 0], "censored": [False, False, True, False, False, False]})
    arm = dtab.arm_runs(runs, "llama", "recall", "finite")  # run a is listed under two measurements
    assert list(arm.run) == ["a", "b", "c"]
    assert dtab.solved_of(arm) == "2 of 3"
    assert dtab.solved_of(arm.assign(censored=True)) == "0 of 3"


def test_committed_study_rows_have_intervals_inside_their_panels():
    import matplotlib.pyplot as plt

    from llamanat_core.study import SEEDS

    _, _, d = dtab.chapter_decisions(SEEDS)
    primary = d[d.primary.astype(bool)]
    fig = dfig.decision_forest(primary, dfig.PRIMARY_PANELS)  # as the results chapter draws it
    for ax in (ax for ax in fig.axes if ax.axison):
        lo, hi = ax.get_xlim()
        assert all(lo < seg[:, 0].min() and seg[:, 0].max() < hi for seg in _bars(ax))
    plt.close(fig)
    assert (dtab.decision_table(d)["effect [interval]"].str.contains("-")).sum() == 0


def test_difference_sd_is_the_spread_of_the_per_seed_differences():
    import types

    runs = pd.DataFrame({"run": list("abcdef"), "task": "recall", "variant": ["llama"] * 3 + ["x"] * 3,
                         "regime": "finite", "seed": [0, 1, 2] * 2, "answer": "name", "rope_theta": 10_000.0,
                         "stop_acc_8": [0.5, 0.5, 0.5, 0.6, 0.7, 0.9]})
    row = types.SimpleNamespace(metric="length_8",
                                reference_arm=("recall", "llama", "finite", 10_000.0, "name"),
                                control_arm=("recall", "x", "finite", 10_000.0, "name"))
    assert dtab.difference_sd(runs, row, seeds=[0, 1, 2]) == pytest.approx(np.std([0.1, 0.2, 0.4], ddof=1))
    assert np.isnan(dtab.difference_sd(runs, row, seeds=[0]))


def test_what_moved_lists_changed_rows_and_says_how(decisions):
    """A registered decision the correction drops is withdrawn; a decision only the
    correction makes is post hoc; an undecided row that now says why is relabelled."""
    registered = decisions.copy()
    corrected = decisions.copy()
    corrected.loc[1, "verdict"] = "undecided"                 # worse → undecided
    registered.loc[2, "verdict"], corrected.loc[2, "verdict"] = "undecided", "equivalent"
    corrected.loc[3, "verdict"], registered.loc[3, "verdict"] = "rarely solved", "undecided"
    moved = dtab.what_moved(registered, corrected)
    assert list(moved.moved) == ["withdrawn", "post hoc", "relabelled"]
    assert list(moved["registered verdict"]) == ["worse", "undecided", "undecided"]
    assert list(moved.index) == ["postnorm, addition, finite", "mha, addition, finite", "gelu_mlp, finite"]
    assert list(moved.endpoint) == ["speed", "speed", "12 pairs"]
    assert dtab.what_moved(decisions, decisions).empty


def test_branch_table_reads_the_resampling_record():
    record = {"resamples": 200, "constructions": {"corrected (x)": {
        "decided at ten": {"n": 40, "covered": 39, "false": 1},
        "equivalent at ten": {"n": 0, "covered": 0, "false": 0}}}}
    table = dtab.branch_table(record)
    assert table.loc[("corrected", "decided at ten")].tolist() == ["40", "97.5%", "0.50%"]
    assert table.loc[("corrected", "equivalent at ten"), "coverage"] == "–"


def test_the_resampling_command_carries_the_records_own_draw_count():
    from llamanat_core.study import STUDY_DIR

    committed = json.loads((STUDY_DIR / "resampling_validation.json").read_text())
    assert dtab.resample_command(committed) == (
        f"python benchmarks/sequential_design.py --resample {committed['draws_per_truth']} --write")
    text = dtab.resample_command({"draws_per_truth": 60, "text": True})
    assert text.endswith("--resample 60 --text --write")
    assert dtab.resample_command({"command": "x", "draws_per_truth": 1}) == "x"


def test_the_results_figures_tick_labels_never_collide():
    """At the results chapter's sizes: four strips side by side, one of them the sweep's
    two long names, and a grid of seven columns of solve curves whose end labels ("4,800",
    then the next panel's "0") sit close."""
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import colliding_tick_labels, variant_color

    speed = {"ref": [700, 1000, 4800], "ctl": [300, 500, 4000], "ylabel": "steps to solve (capped)",
             "log": True, "cap": 4800}
    accuracy = {"ref": [0.8, 0.7], "ctl": [0.9, 0.1], "ylabel": "accuracy (%)", "chance": 1 / 12}
    arms = [("llama", "abs_pos", speed), ("llama", "gelu_mlp", accuracy),
            ("rope_theta=10,000", "rope_theta=1,000,000", accuracy), ("llama", "mqa", speed)]
    panels = [{"title": f"{c}, finite\n12 pairs: worse", "reference": r, "control": c} | kind
              for r, c, kind in arms]
    strips = dfig.seed_strip_figure(panels)
    assert colliding_tick_labels(strips) == []
    columns = ["layernorm", "postnorm", "abs_pos", "gelu_mlp", "mha", "mqa", "bias"]
    cells = {(r, c): ([500, 1000, np.nan], [200, 300, 400])
             for r in ("addition, finite", "recall, fresh") for c in columns}
    curves = dfig.solve_curves_figure(cells, 4800, "reference: llama", {c: variant_color(c) for c in columns})
    assert colliding_tick_labels(curves) == []
    plt.close("all")


def test_the_collision_check_sees_labels_that_overlap():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import colliding_tick_labels

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.set_xticks([0, 0.02, 1], ["base 10,000", "base 1,000,000", "far"])
    assert colliding_tick_labels(fig) == [("base 10,000", "base 1,000,000")]
    plt.close(fig)


def test_the_text_table_reads_the_text_decisions():
    from llamanat_core.analysis.text_comparisons import decide_text
    from tests.test_text_comparisons import _study

    table = dtab.text_decision_table(decide_text(_study()))
    assert table.loc["gelu_mlp", "verdict"] == "worse" and table.loc["gelu_mlp", "lower on"] == "0 of 10"
    assert table.loc["gelu_mlp", "Δ nats"] == "+0.080" and table.loc["layernorm", "interval"] == "–"
    assert table.loc["mqa", "verdict"] == "equivalent"
    assert table.loc["base 1,000,000", "Δ nats"] == "−0.020"  # a true minus sign


def test_the_text_replication_and_rate_tables_read_as_prose():
    from llamanat_core.analysis.replication import text_replication
    from llamanat_core.analysis.text_comparisons import decide_text, learning_rate_table
    from tests.test_text_comparisons import _study

    study = _study()
    rep = dtab.text_replication_table(text_replication(decide_text(study), study))
    words = rep.loc["Shazeer 2020", "on text (nats per character)"]
    assert words.startswith("worse: Δ +0.080 [+0.0") and words.endswith("] nats, lower on 0 of 10")
    assert rep.loc["Shazeer 2020", "tested on"] == "gelu_mlp against llama, loss at the end"
    assert rep.loc["Press et al. 2022", "tested on"] == "llama, 4× its window against 1×"
    assert rep.loc["Zhang & Sennrich 2019", "on text (nats per character)"].startswith("pending: Δ ")
    assert "so far" in rep.loc["Zhang & Sennrich 2019", "on text (nats per character)"]
    rates = pd.DataFrame({"variant": v, "rope_theta": 10_000.0, "seed": s, "lr_scale": k, "loss_end": x}
                         for k, ref, ctl in ((0.5, 1.80, 1.85), (1.0, 1.76, 1.78), (2.0, 1.74, 1.70))
                         for s in range(3) for v, x in (("llama", ref), ("mqa", ctl)))
    table = dtab.text_rate_table(learning_rate_table(rates), decide_text(study))
    assert table.loc["mqa"].tolist() == ["×2", "+0.020", "−0.040", "no", "equivalent"]


def test_the_early_stop_cells_are_read_truth_by_truth():
    """A branch that covers well pooled over truths can fail one truth: the conditional
    cells show it, the false decisions as a share of the truth's resamples in every branch,
    the continued branch left out, a null of the estimand marked."""
    record = {"resamples": 140, "constructions": {"corrected (sign test, median seed)": {
        "decided at ten": {"n": 20, "covered": 15, "false": 3,
                           "by_truth": {"median zero, skewed": [10, 10, 0], "at the margin": [10, 5, 3]}},
        "equivalent at ten": {"n": 0, "covered": 0, "false": 0,
                              "by_truth": {"median zero, skewed": [0, 0, 0]}},
        "continued to forty": {"n": 120, "covered": 120, "false": 0,
                               "by_truth": {"median zero, skewed": [80, 80, 0],
                                            "at the margin": [40, 40, 0]}}}}}
    cells = dtab.conditional_cells(record)
    assert set(cells.branch) == {"decided at ten", "equivalent at ten"}
    worst = cells.loc[cells.truth == "at the margin"].iloc[0]
    assert (worst.coverage, worst["false decisions"], worst.null) == (0.5, 3 / 50, False)
    assert cells.loc[cells.truth == "median zero, skewed", "null"].all()
    table = dtab.conditional_table(cells)
    assert table.loc[("corrected", "decided at ten", "at the margin")].tolist() == ["10", "50.0%", "6.00%"]
    assert table.loc[("corrected", "equivalent at ten", "median zero, skewed, a null"), "coverage"] == "–"


def test_a_chapters_ledger_lists_its_rows_in_words(committed_results):
    """The results chapter's ledger of one chapter: every row of its controls once, the
    endpoint in words, no raw measurement name, and the registered verdict only where the
    corrected one differs."""
    from llamanat_core.analysis import comparisons

    decided = comparisons.decide(committed_results)
    ledger = dtab.chapter_ledger(decided, ["postnorm"])
    rows = decided[decided.control == "postnorm"]
    assert len(ledger) == len(rows) and list(ledger.index.names) == ["endpoint", "comparison"]
    assert set(ledger.index.get_level_values("endpoint")) <= set(dtab.SHORT_TITLES.values())
    assert "reference" not in ledger.columns and "solved" in ledger.columns
    differs = (rows.registered_verdict.astype(str) != rows.verdict.astype(str)).to_numpy()
    assert ((ledger.registered != "").to_numpy() == differs).all() and differs.any()
    with pytest.raises(ValueError, match="controls"):
        dtab.chapter_ledger(decided, ["no_such_control"])


def test_the_ledgers_list_every_row_of_each_chapters_controls_once(committed_decisions):
    """`chapter_ledgers`: one table per mechanism chapter, in CHAPTER_CONTROLS' order, each
    holding exactly its controls' rows; every control of the sweep and the alphabet the
    decisions name is some chapter's (a label `decide` wrote differently would drop its
    rows), and a chapter none of whose controls a reader's short run has is left out."""
    ledgers = dtab.chapter_ledgers(committed_decisions)
    chapters = ["norm", "rope", "swiglu", "gqa", "sweep", "alphabet"]
    assert list(ledgers) == list(dtab.CHAPTER_CONTROLS) == chapters
    for name, controls in dtab.CHAPTER_CONTROLS.items():
        assert len(ledgers[name]) == int(committed_decisions.control.isin(controls).sum()) > 0, name
    listed = {c for cs in dtab.CHAPTER_CONTROLS.values() for c in cs}
    for measurement in ("sweep", "alphabet"):
        assert set(committed_decisions[committed_decisions.measurement == measurement].control) <= listed
    without_sweep = committed_decisions[~committed_decisions.control.isin(dtab.CHAPTER_CONTROLS["sweep"])]
    assert list(dtab.chapter_ledgers(without_sweep)) == ["norm", "rope", "swiglu", "gqa", "alphabet"]


def test_the_worked_row_is_the_decided_speed_row_with_the_smallest_p(decisions):
    assert dtab.worked_row(decisions).control == "abs_pos"  # the first of two at p = 0.002, stably
    smaller = decisions.assign(p=[0.01, 0.002, 0.5, 0.001, 0.3, np.nan])
    assert dtab.worked_row(smaller).control == "postnorm"  # gelu_mlp's p is smaller, but not speed
    nothing_decided = decisions.assign(verdict="undecided", p=[0.3, 0.2, 0.5, 0.1, np.nan, np.nan])
    assert dtab.worked_row(nothing_decided).control == "gelu_mlp"  # a reader's short run: smallest p


def test_the_seed_strips_pick_one_row_of_each_kind_by_smallest_p(decisions):
    d = decisions.assign(p=[0.004, 0.002, 0.5, 0.01, 0.3, np.nan])
    # decided speed, decided generalisation, (no equivalent row), undecided
    assert [r.control for r in dtab.seed_strip_rows(d)] == ["postnorm", "gelu_mlp", "mha"]
    assert [r.control for r in dtab.seed_strip_rows(d.assign(verdict="both at chance"))] == ["abs_pos"]


def test_an_interval_that_stays_open_and_how_wide_the_intervals_are():
    ends = [(0.5, 1.1, False), (0.9, 1.1, False), (0.9, 1.1, True), (0.9, 1.3, False)]
    rows = pd.DataFrame([_row(lo=lo, hi=hi, ci_low_ties=ties, ci_high_ties=False, verdict="undecided")
                         for lo, hi, ties in ends])
    assert dtab.stays_open(rows).tolist() == [True, False, True, True]  # inside the margin: closed
    accuracy = {"measurement": "length", "metric": "length_8", "n": 10}
    d = pd.DataFrame([_row(lo=0.5, hi=2.0), _row(lo=0.8, hi=1.25, n=40),
                      _row(lo=-0.2, hi=0.1, verdict="undecided", **accuracy),
                      _row(lo=-0.1, hi=0.0, **accuracy),
                      _row(lo=-0.5, hi=0.5, verdict="both at chance", **accuracy)])
    widths = dtab.interval_widths(d)
    assert widths[(True, 10)] == pytest.approx(np.log(4))
    assert widths[(True, 40)] == pytest.approx(np.log(1.25 / 0.8))
    assert widths[(False, 10)] == pytest.approx(0.2)  # the median of 0.3 and 0.1; both at chance left out


def _solve_runs(task="addition", thetas=(10_000.0,)):
    """Two seeds of llama and abs_pos (and llama at other bases): llama's seed 1 never solves."""
    steps = {"llama": [500.0, np.nan], "abs_pos": [200.0, 300.0]}
    return pd.DataFrame([{"run": f"{v}{th}{seed}", "task": task, "variant": v, "regime": "finite",
                          "rope_theta": th, "answer": "name", "seed": seed, "solve_step": s}
                         for th in thetas for v, ss in steps.items() for seed, s in enumerate(ss)])


def test_the_speed_panels_pair_each_rows_solve_steps_seed_by_seed(decisions):
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import show, variant_color

    nobody = _row(control="every control", verdict="not learned", reference_arm=np.nan, control_arm=np.nan)
    d = pd.concat([decisions.iloc[[0]], pd.DataFrame([nobody])], ignore_index=True)
    cells, notes, colors = dfig.matrix_speed_cells(d, _solve_runs())
    assert notes == {("addition, finite", "abs_pos"): "better"}  # the line no row learns has no panel
    ref, ctl = cells[("addition, finite", "abs_pos")]
    assert list(ctl) == [200, 300] and ref.iloc[0] == 500 and np.isnan(ref.iloc[1])
    assert colors == {"abs_pos": variant_color("abs_pos")}
    fig = dfig.matrix_speed_figure(d, _solve_runs(), 4800)
    assert len([ax for ax in fig.axes if ax.axison]) == 1
    plt.close(fig)
    assert dfig.matrix_speed_figure(d.iloc[1:], _solve_runs(), 4800) is None  # nothing to draw
    show(None)  # and no figure is shown
    base = "recall", "llama", "finite"
    sweep = _row(measurement="sweep", control="rope_theta=10", task="recall", comparison="rope_theta=10 vs x",
                 reference_arm=(*base, 10_000.0, "name"), control_arm=(*base, 10.0, "name"))
    runs = _solve_runs("recall", (10_000.0, 10.0))
    cells, notes, colors = dfig.recall_speed_cells(pd.DataFrame([sweep]), runs)
    assert list(cells) == [("recall, finite", "base 10")] and list(colors) == ["base 10"]


def test_a_strip_panel_per_row_on_its_endpoints_scale(decisions):
    runs = _solve_runs().assign(time_capped=lambda r: r.solve_step.fillna(4800))
    (panel,) = dfig.seed_strip_panels(runs, [decisions.iloc[0]], 4800)
    assert panel["title"] == "abs_pos, addition, finite\nspeed: better"
    assert list(panel["ref"]) == [500, 4800] and list(panel["ctl"]) == [200, 300]
    assert panel["log"] and panel["cap"] == 4800 and "chance" not in panel


def test_endpoint_spread_is_the_median_over_live_rows_per_endpoint():
    runs = pd.DataFrame({"run": list("abcdefgh"), "task": "recall", "variant": ["llama"] * 4 + ["x"] * 4,
                         "regime": "finite", "seed": [0, 1, 2, 3] * 2, "answer": "name",
                         "rope_theta": 10_000.0, "stop_acc_8": [0.5] * 4 + [0.6, 0.7, 0.9, 0.8],
                         "time_capped": [100.0] * 4 + [100.0, 200.0, 400.0, 100.0]})
    arms = {"reference_arm": ("recall", "llama", "finite", 10_000.0, "name"),
            "control_arm": ("recall", "x", "finite", 10_000.0, "name")}
    primary = pd.DataFrame([{"metric": "length_8", "verdict": "undecided", **arms},
                            {"metric": "speed", "verdict": "worse", **arms},
                            {"metric": "speed", "verdict": "both at chance", **arms}])  # left out
    sd = dtab.endpoint_spread(runs, primary, seeds=[0, 1, 2])
    assert list(sd.index) == [False, True]
    assert sd[False] == pytest.approx(np.std([0.1, 0.2, 0.4], ddof=1))
    assert sd[True] == pytest.approx(np.std(np.log([1, 2, 4]), ddof=1))
    assert np.isnan(dtab.endpoint_spread(runs, primary.iloc[:1], seeds=[0, 1, 2])[True])  # no speed row


def test_tost_power_table_rises_with_seeds_and_falls_with_the_spread():
    from llamanat_core.analysis import stats

    t = dtab.tost_power_table({"wide": (0.15, 0.2), "narrow": (0.05, 0.2)}, seed_counts=(10, 40))
    assert list(t.columns) == ["power at 10 seeds", "power at 40 seeds"]
    assert list(t.index) == ["wide", "narrow"]
    assert t.loc["wide", "power at 40 seeds"] == stats.tost_power(0.15, 0.2, 40)
    assert t.loc["wide", "power at 10 seeds"] < t.loc["wide", "power at 40 seeds"]
    assert t.loc["narrow", "power at 40 seeds"] < t.loc["wide", "power at 40 seeds"]


def test_worked_units_are_rounded_hundredths_of_the_log_ratio_on_the_chosen_seeds():
    import types

    runs = pd.DataFrame({"run": list("abcdef"), "task": "recall", "variant": ["llama"] * 3 + ["x"] * 3,
                         "regime": "finite", "seed": [0, 1, 12] * 2, "answer": "name", "rope_theta": 10_000.0,
                         "time_capped": [100.0, 100.0, 100.0, 200.0, 50.0, 100.0]})
    row = types.SimpleNamespace(metric="speed", reference_arm=("recall", "llama", "finite", 10_000.0, "name"),
                                control_arm=("recall", "x", "finite", 10_000.0, "name"))
    units = dtab.worked_units(runs, row)  # seed 12 is not one of the first ten
    assert units.to_dict() == {0: 69.0, 1: -69.0}  # ln 2 = 0.693...
    assert dtab.worked_units(runs, row, seeds=[12]).to_dict() == {12: 0.0}
