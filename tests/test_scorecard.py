"""The scorecard, the tuned study's per-seed differences and their figure, on made-up
frames whose answers are known."""
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import text_design as td
from llamanat_core.analysis.scorecard import (
    CARD_COLUMNS,
    MECHANISMS,
    NOT_RUN,
    PENDING,
    at_best_rates,
    card_table,
    margin_score,
    rate_table,
    scorecard,
    settled_rates,
    text_verdict,
    tuned_differences,
    waiting_words,
)
from llamanat_core.book.plotting import tuned

SEEDS = range(10)
SETTLED = (0.25, 0.5, 1.0, 2.0, 4.0)  # a grid on which every planted best rate is interior
PLANTED = {  # arm -> (its best rate, its per-seed difference from the reference at the best rates)
    "llama": (1.0, np.zeros(10)),
    "postnorm": (2.0, np.array([0.03, 0.02, 0.05, 0.01, 0.04, 0.03, 0.06, 0.02, 0.03, 0.04])),
    "base 10": (0.5, -np.linspace(0.001, 0.010, 10)),
}


def tuned_runs(planted=PLANTED, sizes=("S",), seeds=SEEDS, rates=(0.5, 1.0, 2.0)) -> pd.DataFrame:
    """Every arm at `rates` on every seed (postnorm's and base 10's best at an edge, their
    brackets open, unless `rates` is `SETTLED`). At its best rate an arm's test loss is the
    reference's plus its planted difference; at any other rate 0.05 more plus 0.01 per
    factor of two away, and its validation loss higher still, so the best rate is clear."""
    rows = []
    for size in sizes:
        for arm, (best, diff) in planted.items():
            variant, theta = ("llama", float(arm[5:].replace(",", ""))) if arm.startswith("base ") else \
                (arm, 10_000.0)
            for lr in rates:
                away = 0.0 if lr == best else 0.05 + 0.01 * abs(math.log2(lr / best))
                for s in seeds:
                    test = 1.76 + 0.002 * s + diff[s] + away
                    rows.append({"size": size, "variant": variant, "rope_theta": theta, "lr_scale": lr,
                                 "seed": s, "loss_val": test + 2 * away, "loss_end": test,
                                 "loss_half": test + 0.1, "loss_2x": test + 0.05, "loss_4x": test + 0.3})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- per-seed differences

def test_tuned_differences_pair_each_arm_at_its_own_best_rate():
    d = tuned_differences(tuned_runs(rates=SETTLED))
    for arm in ("postnorm", "base 10"):
        got = d[d.arm == arm].sort_values("seed")
        np.testing.assert_allclose(got.difference, PLANTED[arm][1], atol=1e-12)
        assert (got.lr_arm == PLANTED[arm][0]).all() and (got.lr_reference == 1.0).all()
    assert "llama" not in set(d.arm)
    # at the common rate the differences would carry the 0.06 of a rate one factor away
    runs = tuned_runs(rates=SETTLED).query("lr_scale == 1.0 and rope_theta == 10000.0")
    common = runs[runs.variant == "postnorm"].loss_end.to_numpy() - \
        runs[runs.variant == "llama"].loss_end.to_numpy()
    assert np.abs(common - d[d.arm == "postnorm"].difference.to_numpy()).min() > 0.05


def test_an_arm_whose_rate_is_not_chosen_is_left_out_and_bad_input_is_named():
    runs = tuned_runs(rates=SETTLED)
    runs = runs[~((runs.variant == "postnorm") & (runs.seed == 2))]  # one rate-choosing seed missing
    assert {"base 10"} == set(tuned_differences(runs).arm)
    # a bracket whose best sits at its edge may still move: left out until it settles
    assert set(tuned_differences(tuned_runs()).arm) == set()
    with pytest.raises(ValueError, match="loss_val"):
        tuned_differences(tuned_runs().drop(columns="loss_val"))
    with pytest.raises(ValueError, match="endpoint"):
        tuned_differences(tuned_runs(), endpoint="loss_val")


# ---------------------------------------------------------------- the figure

def test_size_differences_figure_puts_each_seed_where_it_belongs():
    both = tuned_differences(tuned_runs(sizes=("S", "M"), rates=SETTLED))
    frame = both[~((both["size"] == "M") & (both.arm == "base 10"))]  # base 10 not run at M
    fig = tuned.size_differences_figure(frame)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == ["rotation base 10", "post-norm"]  # by S median
    dots = {c.get_gid(): c.get_offsets() for c in ax.collections}
    assert set(dots) == {"base 10|S", "postnorm|S", "postnorm|M"}
    for row, arm in enumerate(["base 10", "postnorm"]):
        for size, (_, _, offset) in tuned.SIZE_STYLE.items():
            if f"{arm}|{size}" not in dots:
                continue
            xy = np.asarray(dots[f"{arm}|{size}"])
            bits = np.asarray(PLANTED[arm][1]) / math.log(2)  # drawn in bits per character
            np.testing.assert_allclose(np.sort(xy[:, 0]), np.sort(bits), atol=1e-12)
            np.testing.assert_allclose(xy[:, 1], row + offset)
    medians = {ln.get_gid(): ln.get_xdata() for ln in ax.get_lines() if ln.get_gid()}
    assert medians["median postnorm|M"][0] == pytest.approx(np.median(PLANTED["postnorm"][1]) / math.log(2))
    band = ax.patches[0]
    margin = td.MARGIN / math.log(2)
    assert (band.get_x(), band.get_x() + band.get_width()) == pytest.approx((-margin, margin))
    plt.close(fig)


def test_size_differences_figure_names_a_missing_column():
    frame = tuned_differences(tuned_runs(rates=SETTLED))
    with pytest.raises(ValueError, match="difference"):
        tuned.size_differences_figure(frame.drop(columns="difference"))
    with pytest.raises(ValueError, match="size"):
        tuned.size_differences_figure(frame.assign(size="L"))


# ---------------------------------------------------------------- the scorecard

def puzzles() -> pd.DataFrame:
    rows = [("postnorm", True, v) for v in ["worse"] * 3 + ["equivalent"] * 2 + ["undecided"] * 3]
    rows += [("postnorm", False, "better"),  # a secondary row: not counted
             ("layernorm", True, "better"), ("layernorm", True, "undecided"),
             ("rope_theta=10", True, "worse"), ("llama copy", True, "worse")]
    return pd.DataFrame(rows, columns=["control", "primary", "verdict"]).assign(measurement="matrix")


def verdicts(rows: dict, size: str) -> pd.DataFrame:
    """Primary rows arm -> (effect, ci_low, ci_high, verdict) in nats, plus a secondary row
    that must not be read."""
    out = [{"size": size, "comparison": arm, "endpoint": td.PRIMARY, "primary": True, "effect": e,
            "ci_low": lo, "ci_high": hi, "verdict": v} for arm, (e, lo, hi, v) in rows.items()]
    out.append({"size": size, "comparison": "postnorm", "endpoint": "loss_half", "primary": False,
                "effect": 9.0, "ci_low": 8.0, "ci_high": 10.0, "verdict": "worse"})
    return pd.DataFrame(out)


S_ROWS = {"postnorm": (0.0693, 0.05, 0.09, "worse"), "layernorm": (0.001, -0.005, 0.006, "equivalent"),
          "gelu_mlp": (-0.004, -0.02, 0.005, "undecided"), "mha": (math.nan, math.nan, math.nan, "pending"),
          "base 10": (0.02, 0.005, math.inf, "worse")}


def test_every_mechanism_one_row_in_bits_against_the_margin():
    card = scorecard(puzzles(), verdicts(S_ROWS, "S"), verdicts({"layernorm": S_ROWS["layernorm"]}, "M"))
    assert list(card.columns) == CARD_COLUMNS and list(card.arm) == list(MECHANISMS)
    assert card.mechanism.is_unique and len(card) == 13
    c = card.set_index("arm")
    assert c.loc["postnorm", "S_bits"] == pytest.approx(0.1, abs=1e-4)  # 0.0693 nats = 0.1 bits
    assert c.loc["postnorm", "S_low_bits"] == pytest.approx(0.05 / math.log(2))
    assert c.loc["postnorm", "S_text"] == "worse: +0.1000 [+0.0721, +0.1298] bits per character"
    assert c.loc["base 10", "S_text"].endswith("[+0.0072, +∞] bits per character")
    assert list(c.loc[["postnorm", "layernorm", "gelu_mlp", "mha", "base 10"], "S_margin"]) == [
        "beyond", "within", "undecided", "pending", "undecided"]
    assert c.loc["postnorm", "puzzles"] == "8 rows: 3 worse, none better, 2 equivalent"
    assert c.loc["layernorm", "puzzles"] == "2 rows: none worse, 1 better, none equivalent"
    assert c.loc["base 10", "puzzles"] == "1 row: 1 worse, none better, none equivalent"
    assert c.loc["geglu", "puzzles"] == NOT_RUN  # a text-only control
    hoc = puzzles().assign(post_hoc=False)
    hoc.loc[hoc.verdict == "equivalent", "post_hoc"] = True  # decisions only the correction makes
    card = scorecard(hoc, verdicts(S_ROWS, "S"), verdicts(S_ROWS, "M")).set_index("arm")
    want = "8 rows: 3 worse, none better, none equivalent (2 more post hoc)"
    assert card.loc["postnorm", "puzzles"] == want


def test_a_mechanism_without_its_row_at_a_size_reads_pending():
    card = scorecard(puzzles(), verdicts(S_ROWS, "S"), verdicts({"layernorm": S_ROWS["layernorm"]}, "M"))
    c = card.set_index("arm")
    for col in ("M_verdict", "M_text", "M_margin"):
        assert c.loc["postnorm", col] == PENDING
    words = [col for col in CARD_COLUMNS if col.endswith(("verdict", "text", "margin")) or col == "puzzles"]
    assert not card[words].isna().any().any()
    assert c.loc["layernorm", "M_margin"] == "within"
    # a size whose study has not begun has no row at all: pending, not "not run"
    begun = scorecard(puzzles(), verdicts(S_ROWS, "S"), verdicts(S_ROWS, "S").iloc[0:0].assign(size="M"))
    assert set(begun.M_verdict) == set(begun.M_text) == {"pending"}


def test_the_scorecard_names_the_column_it_lacks():
    s = verdicts(S_ROWS, "S")
    with pytest.raises(ValueError, match="ci_high"):
        scorecard(puzzles(), s.drop(columns="ci_high"), s.assign(size="M"))
    with pytest.raises(ValueError, match="control"):
        scorecard(puzzles().drop(columns="control"), s, s.assign(size="M"))
    with pytest.raises(ValueError, match="size"):  # both sizes passed as one
        scorecard(puzzles(), pd.concat([s, s.assign(size="M")]), s.assign(size="M"))


def test_margin_score_reads_the_interval_not_the_verdict():
    m = td.MARGIN
    assert margin_score(0.5 * m, 3 * m) == "undecided"  # excludes 0 (worse) yet not past the margin
    assert margin_score(-3 * m, -1.5 * m) == "beyond"
    assert margin_score(-m, 0.5 * m) == "undecided"  # touching the margin is not inside it


def test_the_scorecard_reads_decide_tuned_as_it_comes():
    v = td.decide_tuned(tuned_runs(sizes=("S", "M")))
    card = scorecard(puzzles(), v[v["size"] == "S"], v[v["size"] == "M"]).set_index("arm")
    s = v[(v["size"] == "S") & v.primary].set_index("comparison")
    assert s.loc["postnorm", "verdict"] == "worse"
    assert card.loc["postnorm", "S_bits"] == pytest.approx(s.loc["postnorm", "effect"] / math.log(2))
    assert card.loc["postnorm", "S_verdict"] == "worse" and card.loc["mqa", "S_verdict"] == PENDING
    short = td.decide_tuned(tuned_runs(seeds=SEEDS[:9]))  # stage one one seed short
    card = scorecard(puzzles(), short, short.iloc[0:0].assign(size="M")).set_index("arm")
    assert card.loc["postnorm", "S_text"] == "pending: 9 of 10 stage-one seeds"  # what it waits for


def test_a_pending_cell_says_what_it_waits_for():
    assert waiting_words("9 of 10 stage-one seeds so far") == "pending: 9 of 10 stage-one seeds"
    assert waiting_words("continued: 4 of 30 added seeds so far") == "pending: sent on, 4 of 30 added seeds"
    assert waiting_words("rate selection pending") == "pending: rate not chosen yet"
    assert waiting_words(None) == waiting_words(math.nan) == PENDING


# ---------------------------------------------------------------- the rate table

def test_the_rate_table_marks_a_best_rate_only_once_it_is_interior():
    """The reference's best (×1) sits between ×0.5 and ×2: settled and marked; post-norm's
    and base 10's sit at an edge: open, nothing marked; a rate missing a seed says so and
    keeps its bracket open. Cells are the mean validation loss in bits per character."""
    runs = tuned_runs()
    table = rate_table(runs)
    assert list(table.index.get_level_values("mechanism")) == ["reference", "post-norm", "rotation base 10"]
    ref = table.loc[("S", "reference")]
    assert ref["bracket"] == "settled at ×1" and ref["×1"].endswith(" ✓")
    want = runs[(runs.variant == "llama") & (runs.rope_theta == 10_000.0) & (runs.lr_scale == 1.0)
                & (runs.seed < 3)].loss_val.mean() / math.log(2)
    assert float(ref["×1"].removesuffix(" ✓")) == pytest.approx(want, abs=1e-4)
    post = table.loc[("S", "post-norm")]
    assert post["bracket"] == "open" and not any(str(c).endswith("✓") for c in post)
    short = rate_table(runs.drop(runs[(runs.variant == "llama") & (runs.rope_theta == 10_000.0)
                                      & (runs.lr_scale == 2.0) & (runs.seed == 2)].index))
    assert short.loc[("S", "reference"), "×2"] == "2 of 3 seeds"
    assert short.loc[("S", "reference"), "bracket"] == "open"


def test_selected_loss_reads_the_selection_seeds_at_the_selected_rate():
    from llamanat_core.analysis.scorecard import selected_loss

    runs = tuned_runs()
    want = runs[(runs.variant == "llama") & (runs.rope_theta == 10_000.0) & (runs.lr_scale == 1.0)
                & (runs.seed < 3)].loss_end.mean()
    assert selected_loss(runs) == pytest.approx(want)
    assert selected_loss(runs, column="loss_val") == pytest.approx(want)  # no rate penalty at the best
    assert selected_loss(runs, arm="postnorm") is None  # its best sits at an edge
    assert selected_loss(runs, size="M") is None


def test_unplanned_runs_are_those_no_stage_calls_for_yet():
    """Seeds past 0-2 only at an arm's selected rate or the reference's; M only for an arm
    settled at S. post-norm's bracket is open (its best sits at an edge), so its seed 5 at
    ×2 and any M run of it are unplanned; the reference's M runs are not."""
    from llamanat_core.analysis.scorecard import unplanned_runs

    runs = tuned_runs(seeds=range(3))
    extra = tuned_runs(seeds=range(10)).query("seed >= 3")
    ref_best = extra[(extra.variant == "llama") & (extra.rope_theta == 10_000.0) & (extra.lr_scale == 1.0)]
    post_common = extra[(extra.variant == "postnorm") & (extra.lr_scale == 1.0)]
    post_edge = extra[(extra.variant == "postnorm") & (extra.lr_scale == 2.0) & (extra.seed == 5)]
    ref_m = tuned_runs(planted={"llama": PLANTED["llama"]}, sizes=("M",), seeds=range(3))
    assert unplanned_runs(pd.concat([runs, ref_best, post_common, ref_m])).empty
    found = unplanned_runs(pd.concat([runs, post_edge]))
    assert list(zip(found.arm, found.seed, found.lr_scale)) == [("postnorm", 5, 2.0)]
    post_m = tuned_runs(planted={"postnorm": PLANTED["postnorm"]}, sizes=("M",), seeds=range(1))
    assert set(unplanned_runs(pd.concat([runs, post_m])).arm) == {"postnorm"}


def test_the_card_table_shows_each_mechanism_once_in_words():
    card = scorecard(puzzles(), verdicts(S_ROWS, "S"), verdicts(S_ROWS, "M"))
    table = card_table(card)
    assert list(table.index) == list(MECHANISMS.values())
    assert table.loc["post-norm", "text, S"] == "worse: +0.1000 [+0.0721, +0.1298] bits per character"
    assert table.loc["post-norm", "S against the margin"] == "beyond"
    assert table.loc["MQA", "text, M"] == PENDING


def test_the_bracket_figure_draws_each_arms_means_in_bits_with_the_reference_behind():
    from llamanat_core.analysis.scorecard import bracket_means

    means = bracket_means(tuned_runs())
    ref = means[(means.arm == "llama")]
    assert ref.best.tolist() == [False, True, False]  # ×1 sits between ×0.5 and ×2
    assert not means[means.arm == "postnorm"].best.any()  # best at an edge: not selected yet
    fig = tuned.bracket_figure(means)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}
    assert set(lines) == {"bracket postnorm", "bracket base 10"}
    post = means[means.arm == "postnorm"]
    np.testing.assert_allclose(lines["bracket postnorm"].get_ydata(), post["mean"] / math.log(2))
    plt.close(fig)
    with pytest.raises(ValueError, match="size 'M'"):
        tuned.bracket_figure(means, size="M")


def test_the_runs_at_best_rates_are_the_settled_arms_own():
    runs = tuned_runs(rates=SETTLED)
    assert settled_rates(runs) == {"llama": 1.0, "postnorm": 2.0, "base 10": 0.5}
    best = at_best_rates(runs)
    assert sorted(set(zip(best.arm, best.lr_scale))) == [("base 10", 0.5), ("llama", 1.0), ("postnorm", 2.0)]
    assert len(best) == 3 * len(SEEDS)
    assert at_best_rates(tuned_runs()).arm.tolist() == ["llama"] * len(SEEDS)  # the others' brackets are open
    assert at_best_rates(runs, size="M").empty


def test_a_text_verdict_is_the_primary_row_of_its_arm():
    v = td.decide_tuned(tuned_runs(rates=SETTLED))
    row = text_verdict(v, "postnorm")
    assert row.verdict == "worse" and row.n == 10 and row.endpoint == td.PRIMARY
    with pytest.raises(KeyError, match="no primary row for 'mqa' at S"):
        text_verdict(v, "mqa")
