"""The text chapter's probes: the baselines on cases whose answer is known by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from llamanat_core.book.helpers.text import corpus_table, held_out_above_from, uniform_loss, unigram_loss
from llamanat_core.data.corpus import check_corpus
from llamanat_core.data.text import Corpus


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


def test_the_ngram_table_reads_bits_on_the_half_asked_for():
    from llamanat_core.book.helpers.text import ngram_table

    def entry(n, smooth):  # nats: lower with each order, Kneser-Ney a little lower; test 0.1 above val
        return {h: {"nats": 3.0 - n / 4 - smooth + d, "bits": (3.0 - n / 4 - smooth + d) / math.log(2)}
                for h, d in (("val", 0.0), ("test", 0.1))}

    baselines = {"vocab": 81, "uniform": {"nats": math.log(81), "bits": math.log2(81)},
                 "witten_bell": {str(n): entry(n, 0.0) for n in (1, 2, 3)},
                 "kneser_ney": {str(n): entry(n, 0.05) for n in (1, 2, 3)}}
    t = ngram_table(baselines, {"the trained reference (llama)": 1.0 * math.log(2),
                                "tuned": 0.5 * math.log(2)})
    assert list(t.index) == ["uniform over 81 characters", "unigram (character frequencies)", "2-gram",
                             "3-gram", "the trained reference (llama)", "tuned"]
    assert t.loc["tuned"].tolist() == [0.5, 0.5]
    assert t.loc["3-gram", "Witten–Bell"] == pytest.approx((3.0 - 0.75 + 0.1) / math.log(2))  # the test half
    assert t.loc["3-gram", "Kneser–Ney"] < t.loc["3-gram", "Witten–Bell"]
    assert t.loc["the trained reference (llama)"].tolist() == [1.0, 1.0]  # nats turned into bits
    val = ngram_table(baselines, half="val")
    assert val.loc["2-gram", "Witten–Bell"] < t.loc["2-gram", "Witten–Bell"]  # the other half is read
    assert "validation" in val.index.name and "test" in t.index.name
    with pytest.raises(ValueError, match="half"):
        ngram_table(baselines, half="train")
