"""The sensitivity analyses: each map changes the one endpoint choice it names, on runs
constructed so the answer is known, and the table shows exactly the rows that move."""
import numpy as np
import pandas as pd

from llamanat_core.analysis import sensitivity


def _curves():
    """Three runs evaluated every 100 steps: `a` passes 0.8 at 200, 0.9 at 300, 0.95 at 400;
    `b` reaches 0.9 at 300 and stops at 400 without reaching 0.95; `c` never solves (cap 500)."""
    acc = {"a": [0.5, 0.85, 0.92, 0.96, 0.97], "b": [0.5, 0.7, 0.91, 0.93], "c": [0.1, 0.2, 0.3, 0.3, 0.3]}
    return pd.DataFrame([{"run": r, "step": 100 * (i + 1), "val_acc": a, "stop_step": 100 * len(v),
                          "steps": 500} for r, v in acc.items() for i, a in enumerate(v)])


def _runs():
    return pd.DataFrame({"run": ["a", "b", "c"], "solve_step": [300.0, 300.0, np.nan],
                         "censored": [False, False, True], "stop_step": [500, 400, 500], "steps": [500] * 3,
                         "time_capped": [300.0, 300.0, 500.0], "test_acc_8": [0.4, 0.5, 0.1],
                         "test_acc_12": [0.3, 0.2, 0.1], "stop_acc_8": [0.9, 0.8, 0.1],
                         "stop_acc_12": [0.7, 0.6, 0.1]})


def test_a_threshold_moves_the_time_and_leaves_unobserved_runs_out():
    curves = _curves()
    low = sensitivity.at_threshold(curves, 0.8)(_runs())
    assert list(low.time_capped) == [200.0, 300.0, 500.0] and list(low.censored) == [False, False, True]
    high = sensitivity.at_threshold(curves, 0.95)(_runs())
    assert high.time_capped[0] == 400.0 and np.isnan(high.time_capped[1]) and high.time_capped[2] == 500.0
    assert sensitivity.unobserved_runs(curves, 0.95) == 1 and sensitivity.unobserved_runs(curves, 0.8) == 0


def test_a_shorter_cap_censors_late_solves_and_the_checkpoint_replaces_the_stop():
    capped = sensitivity.at_cap(250)(_runs())
    assert list(capped.time_capped) == [250.0] * 3 and capped.censored.all() and (capped.steps == 250).all()
    assert list(sensitivity.at_cap(300)(_runs()).censored) == [False, False, True]
    fixed = sensitivity.at_checkpoint(_runs())
    assert list(fixed.stop_acc_8) == [0.4, 0.5, 0.1] and list(fixed.stop_acc_12) == [0.3, 0.2, 0.1]


def test_what_moves_lists_only_changed_rows_and_a_fold_is_no_move():
    table = pd.DataFrame({"as decided": ["worse", "undecided", "both at chance", "equivalent"],
                          "cap 2,400": ["worse", "worse", "not learned", "equivalent"],
                          "solve at 0.80": ["worse", "undecided", "both at chance", None]},
                         index=["r1", "r2", "r3", "r4"])
    moved = sensitivity.what_moves(table)
    assert list(moved.index) == ["r2", "r4"] and moved.loc["r4", "solve at 0.80"] == "–"
    assert sensitivity.moved_counts(table) == {"cap 2,400": 1, "solve at 0.80": 1}


def test_readable_names_a_base_and_an_endpoint_as_the_page_does():
    key = ("sweep", "rope_theta=1,000,000 vs rope_theta=10,000", "recall", "finite", "length_12")
    idx = pd.MultiIndex.from_tuples([key], names=sensitivity.KEY)
    verdicts = pd.DataFrame({"as decided": ["better"], "cap 2,400": ["equivalent"]}, index=idx)
    out = sensitivity.readable(verdicts)
    assert list(out.index) == [("base 1,000,000 vs base 10,000, recall, finite", "12 pairs")]
    assert list(out.columns) == ["as decided", "cap 2,400"]
