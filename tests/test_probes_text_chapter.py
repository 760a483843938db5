"""The text chapter's probes: the baselines on cases whose answer is known by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from llamanat_core.corpus import check_corpus
from llamanat_core.probes.text_chapter import corpus_table, held_out_above_from, uniform_loss, unigram_loss
from llamanat_core.text import Corpus


def test_the_unigram_baseline_is_the_cross_entropy_of_character_counts():
    ids = torch.tensor
    # train counts 2, 2 (+1 each): halves; the test half pays ln 2 a character
    assert unigram_loss(Corpus(ids([0, 0, 1, 1]), ids([0]), ids([0, 1]))) == pytest.approx(math.log(2))
    # a character never seen in training still costs a finite amount: add-one smoothing
    skewed = unigram_loss(Corpus(ids([0, 0, 0, 0, 0, 0]), ids([0]), ids([1])))
    assert skewed == pytest.approx(math.log(8))  # counts 6 + 1 and 0 + 1: p = 1/8


def test_a_uniform_guess_costs_log_v():
    assert uniform_loss(81) == pytest.approx(math.log(81))


@pytest.mark.skipif(check_corpus() is not None, reason="the corpus is not unpacked (make corpus)")
def test_the_corpus_table_counts_every_novel_once():
    t = corpus_table()
    assert len(t) == 6 and t.characters.sum() > 4_000_000 and (t["used for"] == "training").sum() == 5


def test_validation_above_training_from_the_first_step_it_stays_so():
    def curves(val_minus_train):  # two seeds: step -> (seed 0's, seed 1's) val - train
        return pd.DataFrame([{"run": r, "step": step, "train_loss": 2.0, "val_loss": 2.0 + d[r]}
                             for step, d in val_minus_train.items() for r in (0, 1)])

    dips = {50: (0.1, 0.1), 100: (-0.1, 0.1), 150: (0.1, 0.2), 200: (0.1, 0.1)}  # seed 0 dips at 100
    assert held_out_above_from(curves(dips)) == 150
    assert held_out_above_from(curves({50: (0.1, 0.1), 100: (0.1, 0.1)})) == 50
    assert held_out_above_from(curves({50: (0.1, 0.1), 100: (0.1, -0.1)})) is None  # not at the end
