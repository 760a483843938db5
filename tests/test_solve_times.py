"""Speed rows as censored times (`solve_times`), the study as one analysis (`study_wide`),
and the Kaplan–Meier panels, on the committed study and on constructed cases."""
import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import comparisons, solve_times, stats, study_wide
from llamanat_core.book.plotting.survival import (
    kaplan_meier_cells,
    kaplan_meier_figure,
    matrix_survival_figure,
)


@pytest.fixture(scope="module")
def speed(committed_results, committed_decisions):
    return solve_times.speed_rows(committed_results, committed_decisions)


def test_speed_rows_count_solves_and_restricted_means_from_the_pairs(committed_results, speed):
    pairs = comparisons.seed_pairs(committed_results)
    assert len(speed) > 0
    for r in speed.itertuples():
        used = comparisons.used_pairs(pairs[(r.measurement, r.comparison, r.task, r.regime)], r.n)
        assert len(used) == r.n
        solved_c, solved_r = ~used.censored_c.astype(bool), ~used.censored_r.astype(bool)
        assert (r.control_solved, r.reference_solved) == (solved_c.sum(), solved_r.sum())
        discordant = ((solved_c & ~solved_r).sum(), (~solved_c & solved_r).sum())
        assert (r.only_control, r.only_reference) == discordant
        if r.n == 10:  # one stage: the plain exact McNemar
            assert r.p_mcnemar == pytest.approx(stats.mcnemar_exact(r.only_control, r.only_reference))
        assert r.rmst_ratio == pytest.approx(used.time_capped_c.mean() / used.time_capped_r.mean())
        assert r.rmst_low <= r.rmst_ratio <= r.rmst_high
    # no row finds a difference in solves without discordant pairs
    assert (speed.p_mcnemar[(speed.only_control + speed.only_reference) == 0] == 1.0).all()


def test_the_restricted_mean_replaces_the_capped_time_only_in_validated_branches(speed):
    good = {"n": 100, "coverage": 0.95, "false_in_branch": 0.01}
    record = {"branches": {"decided at ten": good | {"coverage": 0.80},
                           "equivalent at ten": good | {"false_in_branch": 0.08},
                           "continued to forty": good}}
    assert solve_times.validated_branches(record) == ["continued to forty"]
    out = solve_times.censored_verdicts(speed, ["continued to forty"])
    forty = out.n == 40
    assert (out.censored_verdict[forty] == out.rmst_verdict[forty]).all()
    assert (out.censored_verdict[~forty] == out.verdict[~forty]).all()
    assert (out.construction[forty] == "restricted mean").all()
    # with no branch validated nothing is replaced
    assert (solve_times.censored_verdicts(speed, []).censored_verdict == speed.verdict).all()


def test_rmst_verdict_reads_the_interval_against_the_speed_margin():
    assert solve_times.rmst_verdict(0.5, 0.9) == "better"
    assert solve_times.rmst_verdict(1.1, 2.0) == "worse"
    assert solve_times.rmst_verdict(0.85, 1.2) == "equivalent"
    assert solve_times.rmst_verdict(0.7, 1.2) == "undecided"


def test_error_control_counts_on_a_constructed_frame():
    rows = pd.DataFrame({"study": ["puzzles"] * 3 + ["text"], "family": ["a", "a", "b", "t"],
                         "comparison": list("wxyz"), "metric": ["speed"] * 3 + ["loss_end"],
                         "p": [0.001, 0.03, 0.5, 0.02], "level": [0.025, 0.05, 0.05, 0.05],
                         "verdict": ["worse", "better", "undecided", "better"]})
    rows["q_all"] = stats.benjamini_hochberg(rows.p)
    facts = study_wide.error_control(rows)
    assert (facts["rows"], facts["families"], facts["holm"]) == (4, 3, 3)
    # BH: 0.001·4 = 0.004, 0.02·4/2 = 0.04, 0.03·4/3 = 0.04, 0.5: three rejected
    assert facts["bh"] == 3 and facts["bh_not_holm"] == 0
    assert facts["families_with_false_bound"] == pytest.approx(0.15)


def test_margins_halved_only_remove_equivalences(committed_results, committed_decisions):
    from llamanat_core.analysis.text_comparisons import decide_text
    from llamanat_core.study import load_text_results

    text_results = load_text_results()
    moved = study_wide.margin_sensitivity(committed_results, text_results, committed_decisions,
                                          decide_text(text_results))
    halved = moved[moved.scale == 0.5]
    assert len(halved) > 0 and (halved.verdict == "equivalent").all()
    assert (halved.verdict_scaled != "equivalent").all()
    everything = study_wide.all_primary(committed_decisions, decide_text(text_results))
    assert set(everything.study) == {"puzzles", "text"}
    assert np.allclose(everything.q_all, stats.benjamini_hochberg(everything.p))
    with pytest.raises(ValueError, match="margin_scale"):
        comparisons.decide(committed_results, margin_scale=0)


def test_kaplan_meier_panels_draw_the_estimate():
    times, solved = np.array([100.0, 200, 300, 400]), np.array([True, True, False, True])
    fig = kaplan_meier_figure({("row", "ctl"): ((times, solved), (times * 2, solved))}, 800)
    ax = fig.axes[0]
    ref = ax.lines[0]
    assert np.allclose(ref.get_ydata()[:5], [100, 75, 50, 50, 0])  # 100 % at 0, then the estimate
    assert np.allclose(ref.get_xdata()[:5], [0, 100, 200, 300, 400])


def test_the_kaplan_meier_panels_are_the_matrix_speed_rows(committed_results, speed):
    """One panel per speed row of the matrix, each arm's capped times and solves on the seeds
    the row used, the log-rank's and the restricted mean's verdicts as its note; no row, no
    figure."""
    cells, notes, colors = kaplan_meier_cells(committed_results, speed)
    matrix = speed[speed.measurement == "matrix"]
    assert len(cells) == len(matrix) > 0 and set(colors) == {column for _, column in cells}
    for (row, column), ((t_r, _), (t_c, solved_c)) in cells.items():
        r = matrix[(matrix.control == column) & (matrix.task + ", " + matrix.regime == row)].iloc[0]
        assert len(t_r) == len(t_c) == r.n and solved_c.sum() == r.control_solved
        assert notes[(row, column)] == f"{r.logrank_verdict}; {r.rmst_verdict}"
    assert matrix_survival_figure(committed_results, speed.iloc[:0], 4800) is None
