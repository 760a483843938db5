"""The chapter-facing views of the verdicts: selections, tables, figures."""

import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import comparisons, sequential
from llamanat_core.book import plotting
from llamanat_core.study import load_curves


def test_variant_rows_keep_the_study_settings_unless_told():
    """The sweep's other bases and the copy answers never slip into a row of the study;
    asked for them by name, they are what comes back."""
    frame = pd.DataFrame({
        "variant": ["llama"] * 4 + ["abs_pos"], "task": ["recall"] * 5,
        "regime": ["finite", "fresh", "finite", "finite", "finite"],
        "answer": ["name", "name", "copy", "name", "name"],
        "rope_theta": [1e4, 1e4, 1e4, 500.0, 1e4]})
    assert list(comparisons.at_settings(frame).index) == [0, 1, 4]
    assert list(comparisons.variant_rows(frame, "llama", "recall").index) == [0, 1]
    assert list(comparisons.variant_rows(frame, "llama", "recall", "finite").index) == [0]
    assert list(comparisons.variant_rows(frame, "llama", "recall", answer="copy").index) == [2]
    assert list(comparisons.variant_rows(frame, "llama", "recall", rope_theta=500).index) == [3]
    assert comparisons.variant_rows(frame, "llama", "addition").empty


def test_loss_at_stop_is_each_runs_last_evaluation():
    curves = load_curves()
    last = comparisons.loss_at_stop(curves)
    assert last.run.is_unique and len(last) == curves.run.nunique()
    row = last.iloc[0]
    own = curves[curves.run == row.run].sort_values("step").iloc[-1]
    assert row.train_loss == own.train_loss and row.gap == pytest.approx(own.val_loss - own.train_loss)


def test_the_loss_figure_draws_and_rejects_a_missing_row():
    plotting.use_book_style()
    curves = load_curves()
    with pytest.raises(ValueError, match="no curves for wide_ff"):
        plotting.loss_figure(curves, "wide_ff", "recall")
    fig = plotting.loss_figure(curves[curves.seed < 10], "gelu_mlp", "recall")
    assert fig.axes and plotting.png_bytes(fig) == plotting.png_bytes(fig)


def test_largest_gap_is_each_runs_worst_evaluation():
    curves = load_curves()
    gaps = comparisons.largest_gap(curves)
    assert gaps.run.is_unique and len(gaps) == curves.run.nunique()
    row = gaps.iloc[-1]
    own = curves[curves.run == row.run]
    worst = (own.val_loss - own.train_loss)
    assert row.max_gap == pytest.approx(worst.max())
    assert row.gap_step == own.step[worst.idxmax()]
    # never below the gap at the stop (the last evaluation is one of those compared)
    last = comparisons.loss_at_stop(curves).set_index("run").gap
    assert (gaps.set_index("run").max_gap >= last.reindex(gaps.run).to_numpy() - 1e-12).all()


# ---------------------------------------------------------------- decide

@pytest.fixture(scope="module")
def decided(committed_results):
    return comparisons.decide(committed_results)


def test_decide_has_every_column_and_agrees_with_itself(decided):
    assert list(decided.columns) == comparisons.DECISION_COLUMNS + comparisons.LATE_COLUMNS
    rows = decided[decided.verdict.isin(["better", "worse", "equivalent", "undecided"])]
    finite = rows[["ci_low", "ci_high", "effect"]].to_numpy(float)
    assert np.isfinite(finite).all()
    for r in rows.itertuples():
        null = 1.0 if r.metric == "speed" else 0.0
        excludes = r.ci_low > null or r.ci_high < null
        assert excludes == (r.verdict in ("better", "worse")) == (r.p <= r.level), r
        tied = r.ci_low_ties or r.ci_high_ties
        inside = r.margin_low < r.ci_low and r.ci_high < r.margin_high and not tied
        # a decided row may lie inside the margin too (a small difference, shown): it is not equivalent
        assert (inside and not excludes) == (r.verdict == "equivalent"), r
        assert comparisons.interval_agrees(pd.Series(r._asdict())), r
        assert r.ci_low <= r.effect <= r.ci_high, r
        if r.metric == "speed":
            assert r.ci_low > 0  # a ratio never reaches 0
        else:
            assert -1 <= r.ci_low and r.ci_high <= 1  # an accuracy gap stays in [-1, 1]


def test_solved_k_of_n_leads_every_speed_row_and_few_solves_never_read_equivalent(decided):
    """Every speed row counts both arms' solved seeds; where either arm solves fewer than
    half, the row is `rarely solved` (never equivalent, never a speed verdict), and its
    ratio is a bound where one arm never solves."""
    speed = decided[(decided.metric == "speed") & (decided.verdict != "not learned")]
    assert speed[["reference_solved", "control_solved"]].notna().all().all()
    assert ((speed.reference_solved <= speed.n) & (speed.control_solved <= speed.n)).all()
    few = (speed[["reference_solved", "control_solved"]].min(axis=1) < speed.n / 2) & \
        (speed.verdict != "both at chance") & ~speed.stopped.str.contains("so far")
    assert (speed.verdict[few] == "rarely solved").all() and few.any()
    assert (speed.verdict[~few] != "rarely solved").all()
    never = speed[(speed.control_solved == 0) & (speed.reference_solved > 0)]
    assert len(never) and (never.bound == "lower").all()
    assert (speed.bound[(speed.control_solved > 0) & (speed.reference_solved > 0)] == "").all()
    gelu = comparisons.decision_row(decided, "matrix", "gelu_mlp", "recall", "finite", "speed")
    assert (gelu.verdict, gelu.control_solved, gelu.bound) == ("rarely solved", 0, "lower")


def test_no_equivalence_from_ties_or_chance_and_no_end_made_by_ties(committed_results, decided):
    """Equivalence needs more than half the pairs informative (not both at the cap, not
    both at chance). The analysis as registered read rows equivalent on ties or chance
    (LayerNorm on fresh recall, 8 of 10 pairs at the cap; post-norm at 12 pairs, both
    arms at chance on most seeds); the corrected one reads none. Flagged ends (made by
    tied pairs) sit exactly at no difference, as LayerNorm's registered lower end does."""
    equivalent = decided[decided.verdict == "equivalent"]
    assert (equivalent.uninformative <= equivalent.n / 2).all()
    registered = comparisons.decide(committed_results, analysis="registered")
    was = registered[(registered.verdict == "equivalent") & (registered.uninformative > registered.n / 2)]
    assert len(was) >= 2
    moved = decided.loc[was.index]
    # a row stage one's sign test now sends on waits for its added seeds, undecided
    waiting = moved.stopped.str.contains("so far")
    assert set(moved.verdict[~waiting]) <= {"rarely solved", "mostly at chance"}
    assert (moved.verdict[waiting] == "undecided").all()
    for frame in (decided, registered):
        null = pd.Series(np.where(frame.metric == "speed", 1.0, 0.0), index=frame.index)
        assert (frame.ci_low[frame.ci_low_ties.astype(bool)] == null[frame.ci_low_ties.astype(bool)]).all()
        assert (frame.ci_high[frame.ci_high_ties.astype(bool)] == null[frame.ci_high_ties.astype(bool)]).all()
    layernorm = comparisons.decision_row(registered, "matrix", "layernorm", "recall", "fresh", "speed")
    assert layernorm.ci_low == 1.0 and layernorm.ci_low_ties
    with pytest.raises(ValueError, match="analysis must be one of"):
        comparisons.decide(committed_results, analysis="hopeful")


def test_post_hoc_marks_exactly_the_decisions_only_the_correction_makes(decided):
    """Beside each corrected row its registered verdict; a better, worse or equivalent the
    registered analysis did not reach is post hoc, and nothing else is."""
    decision = decided.verdict.isin(["better", "worse", "equivalent"])
    assert (decided.post_hoc == (decision & (decided.verdict != decided.registered_verdict))).all()
    assert decided.registered_verdict.notna().all()
    is_primary = decided.primary.astype(bool)
    waiting = decided.stopped.str.contains("so far")
    primary = decided[is_primary & decided.p.notna() & ~waiting]
    assert primary.q_bh.notna().all() and decided.q_bh[~is_primary | waiting].isna().all()


def test_decide_direction_and_margins(decided):
    abs_pos = decided[(decided.control == "abs_pos") & (decided.metric == "speed")
                      & (decided.task == "addition") & (decided.regime == "finite")].iloc[0]
    assert abs_pos.verdict == "better" and abs_pos.effect < 1 and abs_pos.ci_high < 1
    speed = decided[decided.metric == "speed"].iloc[0]
    assert (speed.margin_low, speed.margin_high) == pytest.approx((0.8, 1.25))
    acc = decided[decided.metric == "length_8"].iloc[0]
    assert (acc.margin_low, acc.margin_high) == pytest.approx((-0.15, 0.15))


def test_rows_waiting_for_added_seeds_are_undecided_at_the_stage_one_level(committed_results, decided):
    """A study caught halfway through its added seeds (multi-query attention's runs past
    seed 24 not yet trained): its open rows wait, undecided at the first stage's level,
    and say how many added seeds are in; every other row keeps its verdict."""
    partial = committed_results[~((committed_results.variant == "mqa") & (committed_results.seed >= 25))]
    halfway = comparisons.decide(partial)
    already = decided.stopped.str.contains("added seeds so far")  # rows whose seeds were never run
    waiting = halfway[halfway.stopped.str.contains("added seeds so far") & ~already]
    assert len(waiting) > 0 and set(waiting.control) == {"mqa"}
    assert (waiting.verdict == "undecided").all() and (waiting.level == 0.005).all()
    assert waiting.p_holm.isna().all() and (waiting.n == 10).all()
    assert waiting.stopped.str.endswith("15 of 30 added seeds so far").all()
    assert decided[already].stopped.str.endswith("0 of 30 added seeds so far").all()
    others = ["measurement", "comparison", "task", "regime", "metric"]
    settled = decided[decided.verdict.isin(["better", "worse", "equivalent"]) & (decided.n == 10)]
    assert settled[others + ["verdict"]].merge(halfway[others + ["verdict"]]).shape[0] == len(settled)


def test_a_family_nobody_learns_is_one_row(decided):
    nobody = decided[decided.verdict == "not learned"]
    assert len(nobody) >= 1 and (nobody.comparison == "every control").all()
    family = ["measurement", "task", "regime", "metric"]
    assert not decided[family].merge(nobody[family]).duplicated().any()


def test_added_seed_plan_follows_the_rule(decided):
    from llamanat_core.study.plan import added_seed_plan, arm

    arms = comparisons.added_seed_arms(decided)
    undecided = decided[decided.stopped.str.startswith("undecided on the first") & decided.primary]
    assert set(undecided.reference_arm) | set(undecided.control_arm) == set(arms)
    decided_early = decided[decided.stopped == "decided on the first 10 seeds"]
    only_there = set(decided_early.control_arm) - set(arms)
    runs = {r.key: r for rs in added_seed_plan(arms, sequential.ADDED_SEEDS).values() for r in rs}.values()
    assert {arm(r) for r in runs} == set(arms) and not ({arm(r) for r in runs} & only_there)
    assert all(10 <= r.seed < 40 and not r.keeps_weights for r in runs)
    assert len(runs) == 30 * len(arms)


def test_decision_row_and_interval_agreement(decided):
    row = comparisons.decision_row(decided, "matrix", "abs_pos", "addition", "finite", "speed")
    assert row.verdict == "better" and comparisons.interval_agrees(row)
    absent = comparisons.decision_row(decided, "matrix", "wide_ff", "addition", "finite", "speed")
    assert absent.verdict == "absent" and np.isnan(absent.effect)
    # an interval that excludes no difference under an `undecided` verdict disagrees
    for wrong in ("undecided", "equivalent", "worse"):
        lying = row.copy()
        lying["verdict"] = wrong
        assert not comparisons.interval_agrees(lying)


def test_row_differences_are_each_rows_own_pairs(committed_results, decided):
    """What the resampling validation draws from: one entry per primary row that is tested
    (none at chance on its first ten seeds), integer differences of every seed both rows
    have, and as many of them as a continued row uses."""
    rows = comparisons.row_differences(committed_results)
    key = ["measurement", "comparison", "task", "regime", "metric"]
    by_key = {tuple(r[k] for k in key): r for r in rows}
    tested = decided[decided.primary.astype(bool) & ~decided.verdict.isin(["both at chance", "not learned"])]
    assert set(by_key) == set(tested[key].itertuples(index=False, name=None))
    for t in tested[tested.n == 40].itertuples():
        d = by_key[(t.measurement, t.comparison, t.task, t.regime, t.metric)]["differences"]
        assert d.dtype.kind == "i" and len(d) == 40


def test_stage_one_asks_the_verdicts_test(committed_results):
    """Stage one sends rows on by the sign test the verdict uses: the rows the registered
    sign-flip rule stopped at ten seeds without a verdict continue, read with seeds 10–39
    where those exist and waiting where they do not; the registered analysis keeps its rule."""
    moves = comparisons.stage_one_moves(committed_results)
    assert len(moves) > 0 and (moves.rule_now == "continue").all()
    assert set(moves.rule_before) <= {"decided", "equivalent"}
    read = moves[moves.seeds == "present"]
    assert len(read) > 0 and (read.n_now == 40).all() and (read.verdict_before != read.verdict_now).any()
    waiting = moves[moves.seeds != "present"]
    assert (waiting.n_now == 10).all() and waiting.seeds.str.contains("30 runs of").all()
    # the registered analysis stops a row on the ten seeds the corrected one sends on
    registered = comparisons.decide(committed_results, analysis="registered")
    key = ["measurement", "comparison", "task", "regime", "metric"]
    was = moves[key].merge(registered[key + ["n", "stopped"]])
    assert (was.n == 10).all() and not was.stopped.str.startswith("undecided").any()
    # stage_one itself: nine of ten seeds one way and one tie is decided by sign flips, sent on by
    # the sign test (its interval at 0.005 is the data's range, inside ±30 but not ±10)
    first = np.array([0, 5, 6, 7, 8, 9, 10, 11, 12, 13])
    assert comparisons.stage_one(first, False, 10, "registered") == (False, "decided on the first 10 seeds")
    assert comparisons.stage_one(first, False, 10)[0]
    assert comparisons.stage_one(first, False, 30) == (False, "equivalent on the first 10 seeds")
    assert comparisons.stage_one(first, True, 10) == (False, "both at chance")
