"""The paired decision core both studies share: pairing by seed, the two stages, Holm
within a family, each row finished at its level."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis import comparisons, sequential, stats, text_comparisons
from llamanat_core.analysis.families import (
    decide_families,
    pair_by_seed,
    second_stage,
    stage_pairs,
    with_holm,
)
from llamanat_core.analysis.paired import read_interval
from llamanat_core.study import load_results


def arm(seeds, values):
    return pd.DataFrame({"seed": seeds, "loss": values})


def test_pairs_are_the_seeds_both_arms_have_in_seed_order():
    pair = pair_by_seed(arm([2, 0, 1], [1.0, 2.0, 3.0]), arm([1, 2, 5], [4.0, 5.0, np.nan]))
    assert list(pair.seed) == [1, 2] and list(pair.loss_c - pair.loss_r) == [1.0, 4.0]
    with pytest.raises(ValueError, match="control row has two runs for one seed: \\[1\\]"):
        pair_by_seed(arm([0, 1], [1.0, 1.0]), arm([1, 1], [1.0, 2.0]))
    both = pair_by_seed(arm([3, 12], [1.0, 1.0]), arm([3, 12], [2.0, np.nan]))
    pairs, first, added = stage_pairs(both, "loss")  # a missing value drops its pair
    assert list(pairs.seed) == [3] and list(first.seed) == [3] and added.empty


def test_the_second_stage_counts_only_once_every_added_seed_is_in():
    planned = len(sequential.ADDED_SEEDS)
    assert second_stage(False, arm([10], [0.0])) == (False, False, None)
    some = arm(list(sequential.ADDED_SEEDS)[:5], [0.0] * 5)
    assert second_stage(True, some) == (False, True, f"undecided on the first 10 seeds: 5 of {planned} "
                                                     "added seeds so far")
    every = arm(list(sequential.ADDED_SEEDS), [0.0] * planned)
    assert second_stage(True, every) == (True, False, None)


def test_holm_holds_a_pending_row_at_p_one_within_its_family():
    rows = pd.DataFrame({"family": ["a", "a", "a", "b"], "p": [0.001, 0.02, 0.0001, 0.03],
                         "_pending": [False, False, True, False]})
    out = with_holm(rows.copy(), ["family"], pending_level=0.005)
    # family a: the pending row counts as p = 1, so 0.001 is tested at 0.05 / 3, 0.02 at 0.05 / 2
    want = stats.holm_levels([0.001, 0.02, 1.0])
    assert list(out.level[:2]) == list(want[:2]) and out.level[2] == 0.005
    assert out.level[3] == 0.05 and np.isnan(out.p_holm[2])
    # a plausible mistake, Holm on the pending row's own small p, tests the others at other levels
    assert list(stats.holm_levels([0.001, 0.02, 0.0001])[:2]) != list(want[:2])


def test_each_row_is_finished_at_its_level_and_its_columns_replace_the_cores():
    rows = [{"family": "a", "p": 0.01, "_pending": False}, {"family": "a", "p": 0.04, "_pending": False}]
    out = decide_families(rows, ["family"], lambda r: {"level": r["level"] / 2, "seen": r["level"]})
    assert list(out.seen) == list(stats.holm_levels([0.01, 0.04]))
    assert list(out.level) == [lv / 2 for lv in out.seen] and list(out.columns).count("level") == 1


def test_an_interval_reads_the_same_in_both_studies():
    assert [read_interval(*ci, 1.0) for ci in [(0.5, 2), (-2, -0.5), (-0.5, 0.5), (-2, 0.5), (-1, 0)]] == \
        ["higher", "lower", "equivalent", "undecided", "undecided"]


def test_both_decisions_go_through_the_one_core(monkeypatch):
    seen = []

    def spy(rows, family, finish, pending_level=None):
        seen.append(tuple(family))
        return decide_families(rows, family, finish, pending_level)

    monkeypatch.setattr(comparisons, "decide_families", spy)
    monkeypatch.setattr(text_comparisons, "decide_families", spy)
    seeds = list(range(10))
    losses = {e.column: np.linspace(1.7, 1.8, 20) for e in text_comparisons.TEXT_QUESTIONS}
    runs = pd.DataFrame({"seed": seeds * 2, "variant": ["llama"] * 10 + ["mqa"] * 10,
                         "rope_theta": 10_000.0, "lr_scale": 1.0, **losses})
    text_comparisons.decide_text(runs)
    results = load_results()
    comparisons.decide(results[results.variant.isin(["llama", "mqa"]) & (results.measurement == "matrix")],
                       with_registered=False)
    assert seen == [("family", "metric"), ("measurement", "task", "regime", "metric")]
