"""The chapter-facing views of the verdicts: claims, selections, tables, figures."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from llamanat_core import decisions, plotting, stats
from llamanat_core.study import load_curves


def test_claim_passes_silently_and_fails_naming_the_sentence():
    decisions.claim(True, "it holds")
    decisions.claim(np.bool_(True), "numpy bools count")
    with pytest.raises(decisions.ClaimError, match="abs_pos solves addition sooner"):
        decisions.claim(False, "abs_pos solves addition sooner")


def test_claim_on_a_readers_run_warns_instead_of_failing():
    with pytest.warns(UserWarning, match="the data no longer support"):
        decisions.claim(False, "a sentence", strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decisions.claim(True, "a sentence", strict=False)


def test_claim_refuses_a_premise_that_is_not_a_bool():
    # a Series or a number is almost always a mistake (its truth is ambiguous or not meant)
    with pytest.raises(TypeError, match="must be a bool"):
        decisions.claim(pd.Series([True]), "x")
    with pytest.raises(TypeError, match="must be a bool"):
        decisions.claim(0.3, "x")


def test_study_verdicts_are_the_stats_verdicts_of_the_committed_study(committed_results, committed_verdicts):
    pd.testing.assert_frame_equal(committed_verdicts, stats.verdicts(committed_results))


def test_select_filters_and_rejects_what_the_study_lacks(committed_verdicts):
    rows = decisions.select(committed_verdicts, measurement="matrix", controls="abs_pos", metrics="test_acc")
    assert set(rows.task) == {"addition", "recall"} and set(rows.regime) == {"finite", "fresh"}
    assert all(m.startswith("test_acc@") for m in rows.metric)
    with pytest.raises(ValueError, match="no verdict.*wide_ff"):
        decisions.select(committed_verdicts, controls="wide_ff")


def test_verdict_row_is_one_row_or_an_error(committed_verdicts):
    row = decisions.verdict_row(committed_verdicts, "abs_pos", "addition", "finite", "time_to_solve")
    assert row.comparison == "abs_pos vs llama" and row.verdict in stats.VERDICTS
    # abs_pos recall test_acc lives under "matrix" and (as 8/12 pairs) under "length":
    # test_acc itself is only a matrix metric, so this is still one row
    decisions.verdict_row(committed_verdicts, "abs_pos", "recall", "finite", "test_acc")


def test_effect_text_uses_the_metric_unit():
    tts = pd.Series({"metric": "time_to_solve", "effect": 0.385, "ci_low": 0.3, "ci_high": math.inf})
    assert decisions.effect_text(tts) == "×0.39 [0.30, ∞]"
    acc = pd.Series({"metric": "test_acc@1200", "effect": 0.4815, "ci_low": 0.255, "ci_high": 0.742})
    assert decisions.effect_text(acc) == "+48.1 [+25.5, +74.2]"
    assert decisions.p_text(0.0004) == "< 0.001" and decisions.p_text(0.0137) == "0.014"


def test_verdict_table_has_one_row_per_selected_verdict(committed_verdicts):
    rows = decisions.select(committed_verdicts, measurement="matrix", controls=["abs_pos", "mqa"])
    table = decisions.verdict_table(committed_verdicts, measurement="matrix", controls=["abs_pos", "mqa"])
    assert len(table) == len(rows)
    assert list(table["verdict"]) == list(rows.verdict)
    assert table.index.names == ["comparison", "task, data", "metric"]
    assert list(table.columns)[0] == "verdict"  # in view when the table scrolls
    row = table.loc[("abs_pos vs llama", "addition, finite", "time to solve")]
    assert row["reference → control"] == "1,400 → 600 (9/10 → 10/10 solved)"
    assert row["verdict"] == "better" and row["test"] == "log-rank"


def test_verdict_counts_sum_to_every_comparison(committed_verdicts):
    counts = decisions.verdict_counts(committed_verdicts)
    assert counts.to_numpy().sum() == len(committed_verdicts)
    assert list(counts.index) == ["finite", "fresh"]


def test_solve_table_counts_solved_runs(committed_results):
    table = decisions.solve_table(committed_results, ["llama", "abs_pos"], tasks=["recall"])
    runs = decisions.runs(committed_results)
    for (task, regime, variant), row in table.iterrows():
        g = runs[(runs.task == task) & (runs.regime == regime) & (runs.variant == variant)
                 & (runs.answer == "name") & np.isclose(runs.rope_theta, 10_000.0)]
        assert row.n == len(g) == 10
        assert row.k == int((~g.censored).sum())
        assert row["solved"] == f"{row.k} of {row.n}"
    with pytest.raises(ValueError, match="no runs"):
        decisions.solve_table(committed_results, ["wide_ff"])


def test_loss_at_stop_is_each_runs_last_evaluation():
    curves = load_curves()
    last = decisions.loss_at_stop(curves)
    assert last.run.is_unique and len(last) == curves.run.nunique()
    row = last.iloc[0]
    own = curves[curves.run == row.run].sort_values("step").iloc[-1]
    assert row.train_loss == own.train_loss and row.gap == pytest.approx(own.val_loss - own.train_loss)


def test_km_and_loss_figures_draw_and_reject_missing_rows(committed_results):
    plotting.use_book_style()
    runs = decisions.runs(committed_results)
    fig = plotting.km_figure(runs, ["llama", "abs_pos"], "addition", cap=4800)
    ax = fig.axes[0]
    # one step curve per variant, ending at the fraction of seeds solved
    lines = [ln for ln in ax.get_lines() if ln.get_label() and not ln.get_label().startswith("_")]
    assert [ln.get_label() for ln in lines] == ["llama (9/10)", "abs_pos (10/10)"]
    assert lines[0].get_ydata()[-1] == pytest.approx(90.0)
    assert lines[1].get_ydata()[-1] == pytest.approx(100.0)
    assert plotting.png_bytes(fig) == plotting.png_bytes(fig)
    with pytest.raises(ValueError, match="no curves for wide_ff"):
        plotting.loss_figure(load_curves(), "wide_ff", "recall")


def test_largest_gap_is_each_runs_worst_evaluation():
    curves = load_curves()
    gaps = decisions.largest_gap(curves)
    assert gaps.run.is_unique and len(gaps) == curves.run.nunique()
    row = gaps.iloc[-1]
    own = curves[curves.run == row.run]
    worst = (own.val_loss - own.train_loss)
    assert row.max_gap == pytest.approx(worst.max())
    assert row.gap_step == own.step[worst.idxmax()]
    # never below the gap at the stop (the last evaluation is one of those compared)
    last = decisions.loss_at_stop(curves).set_index("run").gap
    assert (gaps.set_index("run").max_gap >= last.reindex(gaps.run).to_numpy() - 1e-12).all()


def test_solve_rows_and_panels_for_rows_other_than_a_variant(committed_results):
    """The sweep's bases (rows that are not a variant's reference configuration): counts
    as in the runs, one KM curve per row, an empty row or panel refused."""
    runs = decisions.runs(committed_results)
    sweep = runs[runs.run.isin(committed_results[committed_results.measurement == "sweep"].run)]
    groups = {f"base {t:,.0f}": sweep[np.isclose(sweep.rope_theta, t)] for t in (10.0, 10_000.0)}
    table = decisions.solve_rows(groups, index_name="base")
    for label, g in groups.items():
        assert table.loc[label, "n"] == len(g) == 10
        assert table.loc[label, "k"] == int((~g.censored).sum())
    with pytest.raises(ValueError, match="no runs for the row 'nothing'"):
        decisions.solve_rows({"nothing": sweep.iloc[:0]})
    plotting.use_book_style()
    fig = plotting.km_panels_figure({"recall": groups}, cap=4800)
    labels = [ln.get_label() for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")]
    assert labels == [f"{label} ({table.loc[label, 'k']}/10)" for label in groups]
    curves = load_curves()
    curves = curves[curves.run.isin(sweep.run)]
    fig = plotting.loss_panels_figure({"base 10": curves[np.isclose(curves.rope_theta, 10.0)]},
                                      hline=math.log(4), hline_label="ln 4")
    assert fig.axes[0].get_title() == "base 10"
    with pytest.raises(ValueError, match="no curves for the panel 'empty'"):
        plotting.loss_panels_figure({"empty": curves.iloc[:0]})


def test_claims_warn_on_a_chapter_run_with_a_subset_of_the_seeds():
    """The parameter check marks a run on other data than the committed study's every seed
    (a subset of seeds, or fresh runs): its claims warn; the committed run's fail."""
    from llamanat_core.chapters import check_chapter_parameters

    try:
        check_chapter_parameters(seeds=[0, 1])
        with pytest.warns(UserWarning, match="a sentence"):
            decisions.claim(False, "a sentence")
        check_chapter_parameters(seeds=None, fresh=True)
        with pytest.warns(UserWarning, match="a sentence"):
            decisions.claim(False, "a sentence")
        check_chapter_parameters()
        with pytest.raises(decisions.ClaimError, match="a sentence"):
            decisions.claim(False, "a sentence")
    finally:
        decisions.set_committed_run(True)
