"""Counted models of the text: interpolated character n-grams, the baselines a trained
network is read against.

An n-gram model predicts a character from the n - 1 before it (its history) by counting,
in the five training novels, what followed that history. A history seen rarely, or never,
says little, so each order is mixed with the order below it, and order 1 with a uniform
guess: no character ever gets probability zero, and a held-out loss is always finite.
The mixing is Witten–Bell's (required) or Kneser–Ney's (for comparison); both are read
from the same counts, kept as sorted integer codes (a string's characters are the digits
of a base-V number), so counting 3.6 million characters takes a few `np.unique` calls.

`python -m llamanat_core.data.ngram` counts orders 1–5 on the training novels, scores both
halves of the held-out novel and writes `paths.NGRAM_BASELINES_PATH`, which the book
reads with `load_ngram_baselines()`.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..paths import NGRAM_BASELINES_PATH, ROOT
from ..util import atomic_write_text
from .text import VOCAB_SIZE, Corpus, load_corpus

ORDERS = (1, 2, 3, 4, 5)
SMOOTHINGS = ("witten_bell", "kneser_ney")
HALVES = ("val", "test")
COMMAND = "python -m llamanat_core.data.ngram"  # the one command that writes the baselines


@dataclass(frozen=True)
class Level:
    """The counts of one order n, as sorted codes: every n-gram `h w` seen, and every
    history `h` (its first n - 1 characters) seen with at least one character after it."""
    grams: np.ndarray  # (G,) codes of the distinct n-grams, sorted
    gram_counts: np.ndarray  # (G,) c(h w)
    histories: np.ndarray  # (H,) codes of the distinct histories, sorted (code of h w // V)
    history_counts: np.ndarray  # (H,) c(h) = sum over w of c(h w)
    followers: np.ndarray  # (H,) N1+(h •): how many distinct characters followed h
    discount: float = 0.0  # Kneser–Ney's D for this order (Witten–Bell has none)


@dataclass(frozen=True)
class NGramModel:
    """Levels of orders 1..order, mixed by `smoothing`, over `vocab` characters."""
    vocab: int
    levels: tuple[Level, ...]  # levels[n - 1] holds order n
    smoothing: str = "witten_bell"

    def __post_init__(self) -> None:
        if self.smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing must be one of {list(SMOOTHINGS)}, got {self.smoothing!r}")

    @property
    def order(self) -> int:
        return len(self.levels)


def gram_codes(ids: np.ndarray, n: int, vocab: int) -> np.ndarray:
    """The code of every n-gram of `ids` (T,) -> (T - n + 1,): ids[i:i + n] read as a base-
    `vocab` number, so `code // vocab` is its history's code and `code % vocab` its last
    character. Entry k is the n-gram that ends at position k + n - 1."""
    if vocab ** n >= 2 ** 63:
        raise ValueError(f"n={n} with vocab={vocab}: the codes would overflow 64 bits")
    ids = np.asarray(ids, dtype=np.int64)
    codes = np.zeros(max(len(ids) - n + 1, 0), dtype=np.int64)
    if len(codes) == 0:  # shorter than one n-gram
        return codes
    for j in range(n):
        codes = codes * vocab + ids[j:len(ids) - n + 1 + j]
    return codes


def level_from_counts(grams: np.ndarray, counts: np.ndarray, vocab: int, discount: float = 0.0) -> Level:
    """A `Level` from sorted distinct n-gram codes and their counts: the histories are the
    codes without their last digit, so each history's n-grams are one contiguous run."""
    histories, starts, followers = np.unique(grams // vocab, return_index=True, return_counts=True)
    history_counts = np.add.reduceat(counts, starts) if len(grams) else counts
    return Level(grams, counts, histories, history_counts, followers, discount)


def count_ngrams(ids: np.ndarray, order: int, vocab: int = VOCAB_SIZE) -> NGramModel:
    """The raw counts of orders 1..order in `ids` (T,), read as one stream (a history may
    cross the blank line that joins two novels, as the network's windows do): Witten–Bell's
    model of that order, and what `kneser_ney_model` reads."""
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"ids must lie in 0..{vocab - 1} (vocab={vocab})")
    levels = []
    for n in range(1, order + 1):
        grams, counts = np.unique(gram_codes(ids, n, vocab), return_counts=True)
        levels.append(level_from_counts(grams, counts, vocab))
    return NGramModel(vocab, tuple(levels), "witten_bell")


def witten_bell_model(counts: NGramModel, order: int) -> NGramModel:
    """Witten–Bell of `order` from `count_ngrams`' counts: every order uses its raw counts,
    so a lower order is the first levels of a higher one."""
    _check_order(counts, order)
    return NGramModel(counts.vocab, counts.levels[:order], "witten_bell")


def kneser_ney_model(counts: NGramModel, order: int) -> NGramModel:
    """Interpolated Kneser–Ney of `order`: the top order uses raw counts, each order below
    it continuation counts N1+(• g), the number of distinct characters seen before the
    n-gram g (a character that only ever follows one history is a poor guess elsewhere).
    Each order's discount is D = n1 / (n1 + 2 n2), from how many of its counts are 1 and 2."""
    _check_order(counts, order)
    vocab, raw = counts.vocab, counts.levels
    levels = []
    for n in range(1, order + 1):
        if n < order:  # continuation counts: the distinct (n+1)-grams that end in g
            grams, c = np.unique(raw[n].grams % vocab ** n, return_counts=True)
        else:
            grams, c = raw[n - 1].grams, raw[n - 1].gram_counts
        n1, n2 = np.sum(c == 1), np.sum(c == 2)
        discount = float(n1 / (n1 + 2 * n2)) if n1 else 0.5
        levels.append(level_from_counts(grams, c, vocab, discount))
    return NGramModel(vocab, tuple(levels), "kneser_ney")


def _check_order(counts: NGramModel, order) -> None:
    if counts.smoothing != "witten_bell":
        raise ValueError("counts must be count_ngrams' raw counts, not a Kneser–Ney model")
    if not isinstance(order, int) or not 1 <= order <= counts.order:
        raise ValueError(f"order must lie in 1..{counts.order} (the orders counted), got {order!r}")


def _lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """values[k] where keys[k] == query (keys sorted), else 0: the count of what was never seen."""
    if len(keys) == 0:
        return np.zeros(len(queries), dtype=values.dtype)
    at = np.searchsorted(keys, queries).clip(max=len(keys) - 1)
    return np.where(keys[at] == queries, values[at], 0)


def witten_bell(c_hw, c_h, n_h, lower):
    """Interpolated Witten–Bell, one order: the probability of w after the history h,

        P(w | h) = (c(h w) + N1+(h •) P(w | h')) / (c(h) + N1+(h •))
                 = λ c(h w) / c(h) + (1 - λ) P(w | h'),   λ = c(h) / (c(h) + N1+(h •)),

    from the counts c(h w) of h followed by w, c(h) of h followed by anything, N1+(h •)
    of the distinct characters seen after h, and the order below's P(w | h') (`lower`),
    h' being h without its first character; below order 1 is the uniform 1 / V. Where h
    was never seen, P(w | h') alone. The order below weighs 1 - λ: the share of h's
    occurrences that brought a character not yet seen after h, how often h's counts ran
    out. Works elementwise on arrays, one entry per position."""
    seen = c_h > 0
    return np.where(seen, (c_hw + n_h * lower) / np.where(seen, c_h + n_h, 1), lower)


def kneser_ney(c_hw, c_h, n_h, lower, discount: float):
    """Interpolated Kneser–Ney: P(w | h) = (max(c(h w) - D, 0) + D N1+(h •) P(w | h')) / c(h);
    P(w | h') alone where h was never seen."""
    seen = c_h > 0
    return np.where(seen, (np.maximum(c_hw - discount, 0) + discount * n_h * lower) / np.where(seen, c_h, 1),
                    lower)


def stream_probabilities(model: NGramModel, ids: np.ndarray) -> np.ndarray:
    """P(ids[i] | the up to order - 1 characters before it in `ids`) for every i -> (T,).

    Order 0 is uniform, 1 / V. Order n mixes its counts with order n - 1's probability at
    the same position; the first n - 1 positions have no full history, so they keep the
    probability of the longest history they have (position 0: order 1, the unigram)."""
    ids = np.asarray(ids, dtype=np.int64)
    p = np.full(len(ids), 1.0 / model.vocab)
    for n, level in enumerate(model.levels, start=1):
        codes = gram_codes(ids, n, model.vocab)  # (T - n + 1,): the n-gram ending at n - 1, n, ...
        histories = codes // model.vocab
        c_hw = _lookup(level.grams, level.gram_counts, codes)
        c_h = _lookup(level.histories, level.history_counts, histories)
        n_h = _lookup(level.histories, level.followers, histories)
        if model.smoothing == "witten_bell":
            p[n - 1:] = witten_bell(c_hw, c_h, n_h, p[n - 1:])
        else:
            p[n - 1:] = kneser_ney(c_hw, c_h, n_h, p[n - 1:], level.discount)
    return p


def next_char_distribution(model: NGramModel, history) -> np.ndarray:
    """P(w | history) for every character w -> (V,); only the last order - 1 characters of
    `history` count."""
    history = np.asarray(history, dtype=np.int64)
    history = history[max(len(history) - (model.order - 1), 0):]
    return np.array([stream_probabilities(model, np.append(history, w))[-1] for w in range(model.vocab)])


def cross_entropy(model: NGramModel, ids: np.ndarray) -> dict[str, float]:
    """Mean negative log-likelihood per character of `ids`, scored as one continuous
    stream, in nats and in bits.

    Each character is conditioned on the order - 1 characters before it in the same text,
    and the first ones on the shorter history they have. The network is scored instead on
    non-overlapping windows of its context (`text.windows`), each window starting afresh
    (its first target sees one character), so the two read slightly different histories."""
    if len(ids) == 0:
        raise ValueError("ids is empty: there is no character to score")
    nats = float(-np.mean(np.log(stream_probabilities(model, ids))))
    return {"nats": nats, "bits": nats / math.log(2)}


def ngram_baselines(corpus: Corpus, orders=ORDERS, smoothings=SMOOTHINGS) -> dict:
    """Every order of every smoothing counted on the training novels and scored on each
    held-out half: {smoothing: {str(order): {half: {"bits", "nats"}}}}, with the uniform
    guess (log V) and the characters counted and scored."""
    orders = tuple(orders)
    if not orders or any(not isinstance(n, int) or n < 1 for n in orders):
        raise ValueError(f"orders must be positive integers, got {orders!r}")
    unknown = set(smoothings) - set(SMOOTHINGS)
    if unknown:
        raise ValueError(f"smoothings: unknown {sorted(unknown)}; choose from {list(SMOOTHINGS)}")
    halves = {"val": corpus.val.numpy(), "test": corpus.test.numpy()}
    counts = count_ngrams(corpus.train.numpy(), max(orders), VOCAB_SIZE)
    build = {"witten_bell": witten_bell_model, "kneser_ney": kneser_ney_model}
    out = {"vocab": VOCAB_SIZE,
           "uniform": {"nats": math.log(VOCAB_SIZE), "bits": math.log2(VOCAB_SIZE)},
           "characters": {"train": len(corpus.train), **{h: len(ids) for h, ids in halves.items()}}}
    for smoothing in smoothings:
        models = {n: build[smoothing](counts, n) for n in orders}
        out[smoothing] = {str(n): {h: cross_entropy(m, ids) for h, ids in halves.items()}
                          for n, m in models.items()}
    return out


def rounded(value, digits: int = 6):
    """Every float in a nested dict rounded to `digits` (what the committed file holds)."""
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return round(value, digits) if isinstance(value, float) else value


def write_ngram_baselines(baselines: dict, path: Path = NGRAM_BASELINES_PATH) -> Path:
    """Write the baselines atomically: sorted keys, floats to 6 decimals, the same bytes
    for the same numbers."""
    path = Path(path)
    atomic_write_text(path, json.dumps(rounded(baselines), indent=1, sort_keys=True) + "\n")
    return path


def load_ngram_baselines(path: Path = NGRAM_BASELINES_PATH) -> dict:
    """The committed baselines (`ngram_baselines`' dict, as written)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no n-gram baselines at {path}; write them with `{COMMAND}` "
                                "(needs the corpus: `make corpus`)")
    return json.loads(path.read_text())


def main() -> int:
    """Count, score, write; print the bits per character of each order."""
    import time

    start = time.perf_counter()
    baselines = ngram_baselines(load_corpus())
    path = write_ngram_baselines(baselines)
    for smoothing in SMOOTHINGS:
        for n, halves in baselines[smoothing].items():
            print(f"{smoothing} order {n}: " + ", ".join(f"{h} {v['bits']:.4f}" for h, v in halves.items())
                  + " bits per character")
    print(f"ngram: {path.relative_to(ROOT)} written in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
