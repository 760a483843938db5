"""The next text study's registered analysis (`text_design`) and the check that chose its
test (`text_design_check`): each statistical piece on constructed differences with a known
answer, beside a plausible mistake that the same check catches."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from llamanat_core.analysis import sequential, stats
from llamanat_core.analysis import text_design as td
from llamanat_core.analysis import text_design_check as tdc
from llamanat_core.paths import STUDY_DIR

S, M = td.SIZES["S"], td.SIZES["M"]
MARGIN = td.MARGIN / td.UNIT  # 100 units


# ---------------------------------------------------------------- stats: the paired t and two stages

def test_paired_t_tails_are_the_one_sample_t_test():
    d = np.array([3.0, -1.0, 4.0, 1.5, 5.0, 9.0, 2.0])
    for theta in (0.0, 2.0, 6.0):
        up = scipy.stats.ttest_1samp(d, theta, alternative="greater").pvalue
        down = scipy.stats.ttest_1samp(d, theta, alternative="less").pvalue
        assert stats.paired_t_tails(d, theta) == pytest.approx((up, down), abs=1e-12)
    # the population sd (ddof 0), a plausible slip, gives a smaller p: caught
    t0 = d.mean() / (d.std(ddof=0) / math.sqrt(len(d)))
    assert scipy.stats.t.sf(t0, len(d) - 1) < stats.paired_t_tails(d)[0] - 1e-4
    assert stats.paired_t_tails([2.0, 2.0, 2.0]) == (0.0, 1.0)
    assert stats.paired_t_tails([2.0, 2.0], 2.0) == (1.0, 1.0)
    with pytest.raises(ValueError, match="at least two"):
        stats.paired_t_tails([1.0])


def test_two_stage_tail_is_the_registered_combination_and_its_probability():
    """At the 10/40 weights it is `sequential.combine`; at the 5/10 weights it is the
    probability it claims, P(Z1 >= c1) + P(|Z1| < c1, w1 Z1 + w2 Z2 >= z), counted on
    simulated normals; the weights swapped (a plausible slip) miss that count."""
    for p1, p2 in [(0.3, 0.01), (0.02, 0.5), (0.001, 0.2)]:
        assert stats.two_stage_tail(p1, p2, S.w1, S.alpha_first) == pytest.approx(
            sequential.combine(p1, p2), abs=1e-12)
    rng = np.random.default_rng(0)
    z1, z2 = rng.standard_normal((2, 400_000))
    w1, c1 = M.w1 * 0 + math.sqrt(0.3), scipy.stats.norm.isf(0.0025)
    w2 = math.sqrt(1 - w1 ** 2)
    p1, p2 = 0.2, 0.01
    z = w1 * scipy.stats.norm.isf(p1) + w2 * scipy.stats.norm.isf(p2)
    counted = np.mean((z1 >= c1) | ((np.abs(z1) < c1) & (w1 * z1 + w2 * z2 >= z)))
    se = math.sqrt(counted * (1 - counted) / z1.size)
    assert stats.two_stage_tail(p1, p2, w1, 0.005) == pytest.approx(counted, abs=4 * se)
    assert abs(stats.two_stage_tail(p1, p2, w2, 0.005) - counted) > 10 * se
    with pytest.raises(ValueError, match="w1"):
        stats.two_stage_tail(0.1, 0.1, 1.0, 0.005)


# ---------------------------------------------------------------- one row, one family

@pytest.mark.parametrize("test", list(td.CANDIDATES))
def test_the_verdict_read_from_the_tails_is_the_interval_s(test):
    """`judge` (tails at 0 and at the margin's ends) and `covers` agree with the interval
    searched by bisection, on both branches."""
    rng = np.random.default_rng(5)
    for _ in range(25):
        first = rng.integers(-150, 200, 10)
        added = rng.integers(-150, 200, 30) if rng.random() < 0.6 else None
        level = float(rng.choice([0.005, 0.0125, 0.05]))
        tails = td.tails_at(test, first, added, S)
        lo, hi = td.interval_ends(tails, level, first, MARGIN)
        read = "higher" if lo > 0 else "lower" if hi < 0 else \
            "equivalent" if -MARGIN < lo and hi < MARGIN else "undecided"
        assert td.judge(tails, MARGIN, level) == read
        for truth in (t for t in (lo - 1, lo, hi, hi + 1) if math.isfinite(t)):
            assert td.covers(tails, truth, level) == (lo <= truth <= hi)


def test_five_seeds_stop_only_under_a_test_that_can_reach_the_level():
    """Five unanimous, tightly spread seeds: the paired t stops at stage one; sign flips and
    the sign test cannot (their smallest two-sided p on five pairs is 2/32 = 0.0625)."""
    d = np.array([-310, -290, -305, -300, -295])
    assert td.first_look("paired_t_mean", d, M, MARGIN) == "decided"
    assert td.first_look("sign_flip_mean", d, M, MARGIN) == "continue"
    assert td.first_look("sign_test_median", d, M, MARGIN) == "continue"
    assert stats.min_sign_flip_p(5) == 2 / 32 > M.alpha_first


@pytest.mark.parametrize("test", list(td.CANDIDATES))
def test_a_shift_is_found_an_equivalence_called_and_noise_left_undecided(test):
    rng = np.random.default_rng(11)
    shift = rng.normal(-300, 60, 40).round()  # three margins below 0
    tight = rng.normal(0, 40, 40).round()  # 40 seeds well inside ±100
    noisy = np.concatenate([z := rng.normal(0, 400, 20).round(), -z])  # mean 0, wide
    rows = [(d[:10], None if td.first_look(test, d[:10], S, MARGIN) != "continue" else d[10:],
             td.first_look(test, d[:10], S, MARGIN) != "continue") for d in (shift, tight, noisy)]
    verdicts = [r["verdict"] for r in td.decide_family(test, rows, S, MARGIN)]
    assert verdicts == ["lower", "equivalent", "undecided"]


def test_holm_runs_within_the_family():
    """A row whose p lies between 0.05/3 and 0.05 is decided alone and not beside two rows
    of no difference: testing each row at 0.05 (the mistake) would decide it."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        d = rng.normal(-60, 100, 40).round()
        p = td.row_p("paired_t_mean", d[:10], d[10:], S, False)
        if 0.05 / 3 < p < 0.05:
            break
    else:
        raise AssertionError("no row with p between 0.05/3 and 0.05 drawn")
    row = (d[:10], d[10:], False)
    null = (np.tile([-50, 50], 5), np.tile([-50, 50], 15), False)
    alone = td.decide_family("paired_t_mean", [row], S, MARGIN)[0]
    in_family = td.decide_family("paired_t_mean", [row, null, null], S, MARGIN)
    assert alone["verdict"] == "lower" and alone["level"] == 0.05
    assert in_family[0]["verdict"] != "lower"
    assert [r["holm_level"] for r in in_family] == pytest.approx(list(stats.holm_levels(
        [r["p"] for r in in_family])))
    pending = td.decide_family("paired_t_mean", [row, None], S, MARGIN)
    assert pending[1]["verdict"] == "pending" and pending[0]["holm_level"] == pytest.approx(0.025)


# ---------------------------------------------------------------- the study's frame

def study_frame(effects: dict, sd: float = 0.004, seeds=None, val_best: dict | None = None) -> pd.DataFrame:
    """A made-up next study: every arm at both sizes, at three rates on every seed (or on
    `seeds[(size, arm)]`); each arm's test loss is the reference's plus `effects[arm]` plus
    paired noise. `val_best` puts an arm's lowest validation loss at another rate than its
    lowest test loss (the rate must come from the validation half)."""
    rng = np.random.default_rng(7)
    rows = []
    for size, design in td.SIZES.items():
        seed_loss = 1.76 + 0.01 * rng.standard_normal(design.n_max)
        for arm in td.ARMS:
            base = arm.startswith("base ")
            variant, theta = ("llama", float(arm[5:].replace(",", ""))) if base else (arm, 10_000.0)
            for lr in td.LR_SCALES:
                for s in (seeds or {}).get((size, arm), range(design.n_max)):
                    test = seed_loss[s] + effects.get(arm, 0.0) + sd * rng.standard_normal() + 0.02 * abs(
                        math.log2(lr))
                    val = test + (-0.05 if (val_best or {}).get(arm) == lr else 0.0)
                    rows.append({"size": size, "variant": variant, "rope_theta": theta, "lr_scale": lr,
                                 "seed": s, "loss_val": val, "loss_end": test, "loss_half": test + 0.1,
                                 "loss_2x": test + 0.05,
                                 "loss_4x": np.nan if arm == "abs_pos" else test + 0.3})
    return pd.DataFrame(rows)


def test_decide_tuned_finds_the_planted_effects_at_the_rates_the_validation_half_picks():
    runs = study_frame({"postnorm": 0.3, "gelu_mlp": -0.05, "layernorm": 0.0}, val_best={"mqa": 2.0})
    v = td.decide_tuned(runs)
    assert list(v.columns) == td.VERDICT_COLUMNS
    primary = v[v.primary].set_index(["size", "comparison"])
    assert primary.loc[("S", "postnorm"), "verdict"] == "worse"
    assert primary.loc[("S", "gelu_mlp"), "verdict"] == "better"
    assert primary.loc[("S", "layernorm"), "verdict"] in ("equivalent", "undecided")
    assert primary.loc[("S", "postnorm"), "effect"] == pytest.approx(0.3, abs=0.01)
    assert primary.loc[("S", "mqa"), "lr_control"] == 2.0  # its test loss is lowest at 1×
    assert (primary.test.loc["S"] == td.TESTS["S"]).all() and (primary.test.loc["M"] == td.TESTS["M"]).all()
    common = v[v.endpoint == td.SECONDARY[0]].set_index(["size", "comparison"])
    assert common.loc[("S", "mqa"), "lr_control"] == common.loc[("S", "mqa"), "lr_reference"]
    assert "abs_pos" not in set(v[v.endpoint == "loss_4x"].comparison)  # no rows past its table
    secondary = v[~v.primary]
    assert (secondary.n == secondary["size"].map({k: d.n1 for k, d in td.SIZES.items()})).all()
    decided = v[v.verdict.isin(["better", "worse"])]
    assert ((decided.ci_low > 0) | (decided.ci_high < 0)).all()
    assert (decided.p <= decided.level + 1e-12).all()


def test_rows_wait_for_their_seeds_and_the_rule_names_the_runs_to_add():
    few = {("S", "bias"): range(7), ("S", "mha"): range(25)}  # stage one incomplete; stage two under way
    v = td.decide_tuned(study_frame({"postnorm": 0.3}, seeds=few), tests={"S": "paired_t_mean",
                                                                          "M": "paired_t_mean"})
    p = v[v.primary].set_index(["size", "comparison"])
    assert p.loc[("S", "bias"), "verdict"] == "pending" and p.loc[("S", "bias"), "n"] == 7
    if p.loc[("S", "mha"), "stage"].startswith("continued"):
        assert p.loc[("S", "mha"), "verdict"] == "pending" and p.loc[("S", "mha"), "n"] == 25
    add = td.added_arms(v)
    go = p[p.stage.str.startswith("continued")]
    assert len(go) > 0 and "postnorm" not in set(add.variant)
    for (size, arm), r in go.iterrows():
        variant = "llama" if arm.startswith("base ") else arm
        hit = add[(add["size"] == size) & (add.variant == variant) & (add.lr_scale == r.lr_control)]
        assert len(hit) >= 1 and hit.seeds.iloc[0] == td.SIZES[size].added_seeds
    assert ((add.variant == "llama") & (add.rope_theta == 10_000.0)).sum() == add["size"].nunique()


def test_decide_tuned_names_what_is_wrong_with_its_input():
    runs = study_frame({})
    with pytest.raises(ValueError, match="loss_val"):
        td.decide_tuned(runs.drop(columns="loss_val"))
    with pytest.raises(ValueError, match="size"):
        td.decide_tuned(runs.assign(size="L"))
    with pytest.raises(ValueError, match="unknown test"):
        td.decide_tuned(runs, tests={"S": "wilcoxon", "M": "paired_t_mean"})


# ---------------------------------------------------------------- the check and the choice

def test_populations_sit_at_their_truths():
    d = np.array([120, -40, 35, 10, -80, 60, 15, -5, 250, 5])
    pops = tdc.populations(d, 100)
    for name, shift in tdc.TRUTHS.items():
        assert pops[name].mean() == (0 if shift is None else shift * 100)
    sym = pops["no difference (symmetric)"]
    assert tdc.median_of(sym) == 0 and scipy.stats.skew(sym) == pytest.approx(0)
    skew = pops["mean zero, skewed"]
    assert scipy.stats.skew(skew) > 1 and tdc.median_of(skew) < 0
    assert np.array_equal(pops["+margin"] - pops["-margin"], np.full(10, 200))


def test_false_decisions_are_counted_against_the_estimand():
    assert tdc.false_decision("lower", 0.0, 100) and tdc.false_decision("higher", -50.0, 100)
    assert not tdc.false_decision("lower", -50.0, 100)
    assert tdc.false_decision("equivalent", 100.0, 100) and not tdc.false_decision("equivalent", 99.0, 100)
    assert not tdc.false_decision("undecided", 0.0, 100)


def small_rows():
    rng = np.random.default_rng(1)
    return {"matrix": [("a", rng.normal(50, 100, 10).round().astype(np.int64), True),
                       ("b", rng.normal(-300, 100, 10).round().astype(np.int64), False)],
            "bases": [("c", rng.normal(0, 120, 12).round().astype(np.int64), True)]}


def test_the_check_is_deterministic_and_records_its_draws():
    one, two = (tdc.run_check(draws=2, seed=3, rows=small_rows()) for _ in range(2))
    assert json.dumps(one, sort_keys=True, default=tdc._plain) == json.dumps(
        two, sort_keys=True, default=tdc._plain)
    assert one["draws"] == 2
    other = tdc.run_check(draws=2, seed=4, rows=small_rows())
    assert other["sizes"] != one["sizes"]
    s = one["sizes"]["S"]["candidates"]["paired_t_mean"]
    scored_per_truth = 2 * 2  # two scored rows, two draws
    assert sum(b["n"] for b in s["branches"].values()) == scored_per_truth * len(tdc.TRUTHS)
    with pytest.raises(ValueError, match="draws"):
        tdc.run_check(draws=0, rows=small_rows())


def test_the_registered_tests_are_the_rule_applied_to_the_committed_check():
    record = json.loads((STUDY_DIR / "text_design_check.json").read_text())
    chosen = tdc.choose(record)
    assert {size: c["test"] for size, c in chosen.items()} == td.TESTS
    assert record["choice"] == json.loads(json.dumps(chosen))
    # a planted failure: the chosen test's stage-one decisions at S covering 80 % disqualify it
    cell = record["sizes"]["S"]["candidates"][td.TESTS["S"]]["branches"]["decided at stage one"]
    cell["coverage"] = 0.8
    assert tdc.choose(record)["S"]["test"] != td.TESTS["S"]


# ---------------------------------------------------------------- the fourth edition, as registered

def fourth_edition(diffs: dict, seeds: dict) -> pd.DataFrame:
    """A made-up fourth-edition results frame: the reference at 1.76 on every seed 0–39 and
    each control at the reference plus `diffs[control]` (one value a seed) on `seeds[control]`."""
    rows = [{"variant": "llama", "seed": s, "rope_theta": 10_000.0, "lr_scale": 1.0, "loss_end": 1.76,
             "loss_half": 1.9, "loss_2x": 1.85, "loss_4x": 2.1} for s in range(40)]
    for control, d in diffs.items():
        for s in seeds[control]:
            rows.append({"variant": control, "seed": s, "rope_theta": 10_000.0, "lr_scale": 1.0,
                         "loss_end": 1.76 + d[s], "loss_half": 1.9 + d[s], "loss_2x": 1.85 + d[s],
                         "loss_4x": 2.1 + d[s]})
    return pd.DataFrame(rows)


def test_the_registered_analysis_beside_the_corrected_one_says_what_moved():
    """Nine of ten first seeds well above 0 and one just below: the registered sign flips
    stop, decided, on ten seeds; the sign test (nine of ten, p = 22/1,024) sends the row on
    to forty. A row far above on every seed is worse under both, only its estimand moving.
    A row both rules send on, its added seeds not run, waits under both."""
    from llamanat_core.analysis.text_comparisons import decide_text_registered, registered_and_corrected

    rng = np.random.default_rng(3)
    nine = np.concatenate([[-0.001], rng.normal(0.02, 0.004, 39)])
    far = rng.normal(0.3, 0.01, 40)
    noisy = rng.normal(0.0, 0.03, 40)
    results = fourth_edition({"mqa": nine, "postnorm": far, "bias": noisy},
                             {"mqa": range(40), "postnorm": range(10), "bias": range(10)})
    table = registered_and_corrected(results)
    row = table[table.metric == "loss_end"].set_index("comparison")
    assert (row.loc["mqa", "verdict_registered"], row.loc["mqa", "n_registered"]) == ("worse", 10)
    assert row.loc["mqa", "n_corrected"] == 40 and row.loc["mqa", "moved"] == "seeds 10 -> 40"
    assert row.loc["postnorm", ["verdict_registered", "verdict_corrected"]].tolist() == ["worse", "worse"]
    assert row.loc["postnorm", "moved"] == "nothing but the estimand (mean -> median)"
    assert row.loc["bias", "verdict_registered"] == "pending"
    assert row.loc["bias", "moved"] == "both wait for seeds"  # no added seeds run for either rule
    reg = decide_text_registered(results)
    decided = reg[reg.verdict.isin(["better", "worse"])]
    assert len(decided) and (decided.p <= decided.level).all()
    assert reg.loc[(reg.comparison == "postnorm") & (reg.metric == "loss_end"), "effect"].iloc[0] == \
        pytest.approx(far[:10].mean(), abs=2e-4)


def test_on_the_committed_text_study_the_registered_test_decides_every_primary_row():
    """The audit's count, read from the committed runs: all ten primary rows decided or
    equivalent under the registered sign flips, seven under the book's sign tests."""
    from llamanat_core.analysis.text_comparisons import registered_and_corrected
    from llamanat_core.study import load_text_results

    t = registered_and_corrected(load_text_results())
    primary = t[t.primary]
    settled = ["better", "worse", "equivalent"]
    assert len(primary) == 10
    assert primary.verdict_registered.isin(settled).sum() == 10
    assert primary.verdict_corrected.isin(settled).sum() == 7
    same = primary.verdict_registered == primary.verdict_corrected
    assert (primary[~same].moved.str.startswith("verdict ")).all()


def test_the_two_text_analyses_table_shows_the_primary_rows_of_each_analysis():
    """The reader's table keeps only primary rows, one per comparison, and puts each
    analysis's own seeds and verdict under its name (a swapped pair of columns is caught by
    the row whose seeds differ between the two)."""
    from llamanat_core.analysis.decision_tables import two_text_analyses_table
    from llamanat_core.analysis.text_comparisons import registered_and_corrected

    rng = np.random.default_rng(3)
    nine = np.concatenate([[-0.001], rng.normal(0.02, 0.004, 39)])
    results = fourth_edition({"mqa": nine, "postnorm": rng.normal(0.3, 0.01, 40)},
                             {"mqa": range(40), "postnorm": range(10)})
    table = two_text_analyses_table(registered_and_corrected(results))
    assert sorted(table.index) == ["mqa", "postnorm"]
    assert table.loc["mqa", ["registered: seeds", "corrected: seeds"]].tolist() == [10, 40]
    assert table.loc["mqa", ["registered verdict", "corrected verdict"]].tolist() == ["worse", "worse"]
    assert table.loc["postnorm", "mean Δ"].startswith("+0.3")
