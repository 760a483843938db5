"""The counted n-gram baselines: probabilities that sum to one, Witten–Bell by hand on a
tiny string, the file's bytes, the committed numbers against a recount, the plotted lines."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
import pytest

from llamanat_core.book.plotting import draw_ngram_lines
from llamanat_core.data import ngram
from llamanat_core.data.corpus import check_corpus
from llamanat_core.data.text import VOCAB_SIZE

A, B, C = 0, 1, 2  # a three-character vocabulary: "abaab" never shows c


def skewed_text(n: int, vocab: int, seed: int = 0) -> np.ndarray:
    """Random characters with very unequal frequencies; the last two of the vocabulary never
    occur, so many histories and characters are unseen."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab - 1) ** 1.5
    return rng.choice(vocab - 2, size=n, p=weights / weights.sum())


@pytest.mark.parametrize("build", [ngram.witten_bell_model, ngram.kneser_ney_model],
                         ids=["witten_bell", "kneser_ney"])
def test_every_order_sums_to_one_over_the_vocabulary_for_any_history(build):
    vocab = 7
    text = skewed_text(2_000, vocab)
    counts = ngram.count_ngrams(text, 5, vocab)
    rng = np.random.default_rng(1)
    for order in range(1, 6):
        model = build(counts, order)
        for k in rng.integers(0, len(text) - order, size=15):  # histories from the text: seen
            p = ngram.next_char_distribution(model, text[k:k + order - 1])
            assert p.min() > 0 and p.sum() == pytest.approx(1.0, abs=1e-12)
        for _ in range(15):  # random histories: mostly unseen, some with unseen characters
            p = ngram.next_char_distribution(model, rng.integers(0, vocab, size=order - 1))
            assert p.min() > 0 and p.sum() == pytest.approx(1.0, abs=1e-12)


def test_witten_bell_by_hand_on_abaab():
    # Order 1: c(a) = 3, c(b) = 2, c(c) = 0, N = 5, two distinct characters seen:
    #   P1(w) = (c(w) + 2 * 1/3) / (5 + 2)  ->  a 11/21, b 8/21, c 2/21
    # Order 2: bigrams ab ab ba aa; after a: c(a) = 3 with 2 distinct followers (b, a):
    #   P2(b | a) = (c(ab) + 2 P1(b)) / (3 + 2) = (2 + 16/21) / 5 = 58/105
    #   P2(c | a) = (0 + 2 * 2/21) / 5 = 4/105;  P2(a | a) = (1 + 22/21) / 5 = 43/105
    #   c never preceded anything: P2(w | c) = P1(w)
    model = ngram.count_ngrams(np.array([A, B, A, A, B]), 2, vocab=3)
    p1 = [Fraction(11, 21), Fraction(8, 21), Fraction(2, 21)]
    assert ngram.next_char_distribution(ngram.witten_bell_model(model, 1), []) == pytest.approx(
        [float(x) for x in p1], abs=1e-15)
    after_a = [Fraction(43, 105), Fraction(58, 105), Fraction(4, 105)]
    assert ngram.next_char_distribution(model, [A]) == pytest.approx([float(x) for x in after_a], abs=1e-15)
    assert ngram.next_char_distribution(model, [C]) == pytest.approx([float(x) for x in p1], abs=1e-15)
    # a stream "abc": a has no history (order 1); b after a; c after b, where c(b) = 1 (ba)
    # with one distinct follower: P2(c | b) = (0 + 1 * 2/21) / (1 + 1) = 1/21
    stream = ngram.stream_probabilities(model, np.array([A, B, C]))
    assert stream == pytest.approx([11 / 21, 58 / 105, 1 / 21], abs=1e-15)


def test_a_history_shorter_than_the_order_uses_the_orders_it_fills():
    vocab = 7
    text = skewed_text(2_000, vocab)
    counts = ngram.count_ngrams(text, 5, vocab)
    five = ngram.witten_bell_model(counts, 5)
    for length in range(7):  # 0..3 characters: too short for order 5; 4: full; 5, 6: longer than read
        history = text[100:100 + length]
        filled = ngram.witten_bell_model(counts, min(length + 1, 5))
        assert np.array_equal(ngram.next_char_distribution(five, history),
                              ngram.next_char_distribution(filled, history[-4:] if length else history))
    # and the history's characters matter: the model of order 3 reads two of these three
    assert not np.allclose(ngram.next_char_distribution(five, text[100:103]),
                           ngram.next_char_distribution(ngram.witten_bell_model(counts, 3), text[100:103]))


def test_order_one_is_the_unigram_mixed_with_uniform_as_the_formula_says():
    vocab = 9
    ids = skewed_text(500, vocab, seed=3)
    c = np.bincount(ids, minlength=vocab)
    n, seen = c.sum(), np.count_nonzero(c)
    lam = n / (n + seen)  # the weight of the counts: N / (N + N1+)
    expected = lam * c / n + (1 - lam) / vocab
    model = ngram.count_ngrams(ids, 1, vocab)
    assert ngram.next_char_distribution(model, []) == pytest.approx(expected, rel=1e-13)
    # add-one smoothing, a plausible stand-in, is a different model
    assert not np.allclose(ngram.next_char_distribution(model, []), (c + 1) / (n + vocab))


def test_a_dropped_interpolation_or_a_wrong_denominator_is_caught(monkeypatch):
    vocab = 7
    train, held_out = skewed_text(2_000, vocab), np.array([0, 1, vocab - 1, 0])  # an unseen character
    model = ngram.count_ngrams(train, 3, vocab)
    assert math.isfinite(ngram.cross_entropy(model, held_out)["bits"])
    # counts alone (no mixing): the unseen character gets probability 0 and the loss is infinite
    monkeypatch.setattr(ngram, "witten_bell", lambda c_hw, c_h, n_h, lower: np.where(
        c_h > 0, c_hw / np.maximum(c_h, 1), lower))
    with np.errstate(divide="ignore"):
        assert ngram.cross_entropy(model, held_out)["bits"] == math.inf
    # the mixing weight over c(h) instead of c(h) + N1+(h •): the distribution no longer sums to 1
    monkeypatch.setattr(ngram, "witten_bell", lambda c_hw, c_h, n_h, lower: np.where(
        c_h > 0, (c_hw + n_h * lower) / np.maximum(c_h, 1), lower))
    assert ngram.next_char_distribution(model, [0, 1]).sum() > 1.01


def test_kneser_ney_lower_orders_count_distinct_predecessors():
    # "xaxaya" over x=0, a=1, y=2: a follows x twice and y once, so a's continuation count
    # is 2 (x, y), x's is 1 (a), y's is 1 (a): four bigram types in all (xa, ax, ya, ay)
    counts = ngram.count_ngrams(np.array([0, 1, 0, 1, 2, 1]), 2, vocab=3)
    def unigram_counts(model):
        return dict(zip(model.levels[0].grams.tolist(), model.levels[0].gram_counts.tolist()))

    assert unigram_counts(ngram.kneser_ney_model(counts, 2)) == {0: 1, 1: 2, 2: 1}
    assert unigram_counts(counts) == {0: 2, 1: 3, 2: 1}  # the raw counts, which Witten–Bell reads


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="order"):
        ngram.count_ngrams(np.array([0, 1]), 0, vocab=3)
    with pytest.raises(ValueError, match="ids"):
        ngram.count_ngrams(np.array([0, 3]), 1, vocab=3)
    with pytest.raises(ValueError, match="order"):
        ngram.witten_bell_model(ngram.count_ngrams(np.array([0, 1]), 2, vocab=3), 3)
    with pytest.raises(ValueError, match="overflow"):
        ngram.gram_codes(np.array([0]), 10, vocab=81)


def test_the_file_is_the_same_bytes_and_a_missing_one_says_how_to_make_it(tmp_path):
    baselines = {"vocab": 3, "witten_bell": {"1": {"val": {"bits": 1 / 3, "nats": math.log(2)}}}}
    a, b = ngram.write_ngram_baselines(baselines, tmp_path / "a.json"), tmp_path / "b.json"
    ngram.write_ngram_baselines(json.loads(json.dumps(baselines)), b)
    assert a.read_bytes() == b.read_bytes()
    assert ngram.load_ngram_baselines(a)["witten_bell"]["1"]["val"] == {"bits": 0.333333, "nats": 0.693147}
    with pytest.raises(FileNotFoundError, match="python -m llamanat_core.data.ngram"):
        ngram.load_ngram_baselines(tmp_path / "none.json")


@pytest.mark.skipif(check_corpus() is not None, reason="the corpus is not unpacked (make corpus)")
def test_the_committed_baselines_are_a_recount_of_the_corpus():
    from llamanat_core.data.text import load_corpus

    committed = ngram.load_ngram_baselines()
    again = ngram.rounded(ngram.ngram_baselines(load_corpus(), orders=(1, 2, 3)))  # the cheap orders
    for key in ("vocab", "uniform", "characters"):
        assert committed[key] == again[key]
    for smoothing in ngram.SMOOTHINGS:
        assert {n: committed[smoothing][n] for n in again[smoothing]} == again[smoothing]
        # each order lowers the loss: the counts are the training novels', read in order
        bits = [committed[smoothing][str(n)]["test"]["bits"] for n in ngram.ORDERS]
        assert bits == sorted(bits, reverse=True) and bits[0] < math.log2(VOCAB_SIZE)


def test_the_ngram_lines_sit_at_their_loss():
    baselines = {"witten_bell": {str(n): {"val": {"nats": 3.0 - n / 2, "bits": (3.0 - n / 2) / math.log(2)},
                                          "test": {"nats": 3.5 - n / 2, "bits": 0.0}} for n in (1, 2, 3)}}
    fig, ax = plt.subplots()
    lines = draw_ngram_lines(ax, baselines, orders=(2, 3), half="val")
    assert [line.get_ydata()[0] for line in lines] == [2.0, 1.5]
    assert [t.get_text() for t in ax.texts] == ["2-gram", "3-gram"]
    bits = draw_ngram_lines(ax, baselines, orders=(2,), half="val", unit="bits")
    assert bits[0].get_ydata()[0] == pytest.approx(2.0 / math.log(2))
    other_half = draw_ngram_lines(ax, baselines, orders=(2,), half="test")
    assert other_half[0].get_ydata()[0] == 2.5
    with pytest.raises(ValueError, match="orders"):
        draw_ngram_lines(ax, baselines, orders=(4,))
    with pytest.raises(ValueError, match="half"):
        draw_ngram_lines(ax, baselines, half="train")
    plt.close(fig)


def test_the_text_figures_draw_the_ngram_lines_in_bits_on_their_half():
    """The curves are in bits on the validation half, the windows' endpoints on the test
    half: each figure's 3-, 4- and 5-gram lines sit there (a line in nats, or on the other
    half, would sit elsewhere)."""
    import pandas as pd

    from llamanat_core.book.plotting import text_arms_figure, text_loss_figure, text_windows_figure

    orders = (3, 4, 5)
    baselines = {"witten_bell": {str(n): {h: {"nats": 3.0 - n / 4 + (h == "test") / 10,
                                              "bits": (3.0 - n / 4 + (h == "test") / 10) / math.log(2)}
                                          for h in ("val", "test")} for n in orders}}
    val_bits = [baselines["witten_bell"][str(n)]["val"]["bits"] for n in orders]
    test_bits = [baselines["witten_bell"][str(n)]["test"]["bits"] for n in orders]
    curves = pd.DataFrame({"run": "a", "seed": 0, "label": "llama", "step": [0, 100],
                           "train_loss": [4.0, 2.0], "val_loss": [4.0, 2.2]})
    runs = pd.DataFrame({"label": ["llama"], "loss_end": [1.5], "loss_2x": [1.6], "loss_4x": [1.8]})

    def dotted(fig):
        return sorted(line.get_ydata()[0] for line in fig.axes[0].lines if line.get_linestyle() == ":")

    for fig, want in ((text_arms_figure(curves, {"llama": "llama"}, ngrams=baselines), val_bits),
                      (text_loss_figure(curves, ngrams=baselines), val_bits),
                      (text_windows_figure(runs, {"llama": "llama"}, 48, ngrams=baselines), test_bits)):
        assert dotted(fig) == pytest.approx(sorted(want))
        assert {t.get_text() for t in fig.axes[0].texts} >= {"3-gram", "4-gram", "5-gram"}
        plt.close(fig)
    assert dotted(text_arms_figure(curves, {"llama": "llama"})) == []  # none unless asked
