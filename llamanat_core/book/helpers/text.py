"""The text chapter's own measurements: the corpus in numbers, the baselines a character
model must beat, and the trained reference read back from its kept weights. They read the
corpus and the study, and write nothing."""
from __future__ import annotations

import math

import pandas as pd
import torch

from ...data.corpus import NOVELS, TITLES, read_novel
from ...data.text import HELD_OUT, TRAIN_NOVELS, Corpus, split_held_out
from ...study.run import Run
from ...study.weights import load_weights


def corpus_table() -> pd.DataFrame:
    """One row per novel: title, characters, and the part of the study it serves."""
    rows = []
    for name in NOVELS:
        n = len(read_novel(name))
        role = "training" if name in TRAIN_NOVELS else "validation (first half), test (second half)"
        rows.append({"novel": TITLES[name], "characters": n, "used for": role})
    return pd.DataFrame(rows).set_index("novel")


def held_out_halves() -> tuple[int, int]:
    """Characters in the validation and the test half of the held-out novel."""
    val, test = split_held_out(read_novel(HELD_OUT))
    return len(val), len(test)


def unigram_loss(corpus: Corpus) -> float:
    """Nats per character on the test half of a model that knows only how often each
    character occurs in the training novels (add-one smoothed): what a model with no
    context at all achieves."""
    counts = torch.bincount(corpus.train, minlength=int(corpus.train.max()) + 1).double() + 1
    counts = torch.nn.functional.pad(counts, (0, max(0, int(corpus.test.max()) + 1 - len(counts))), value=1)
    logp = (counts / counts.sum()).log()
    return float(-logp[corpus.test].mean())


def uniform_loss(vocab: int) -> float:
    """A uniform guess over the alphabet: ln V nats per character."""
    return math.log(vocab)


def held_out_above_from(curves: pd.DataFrame) -> int | None:
    """The first evaluation step from which every seed's validation loss stays above its
    training loss to the end (`curves`: step, val_loss, train_loss per run and step); None
    if the last step does not have it (a few steps of a quick look may not)."""
    above = curves.groupby("step").apply(lambda g: bool((g.val_loss > g.train_loss).all()))
    return next((int(step) for step in above.index if above.loc[step:].all()), None)


def reference_text_model(variant: str = "llama"):
    """The study's seed-0 text model of `variant` (weights kept for `llama` and `abs_pos`)."""
    run = Run("text", variant, 0)
    model = load_weights(run)
    if model is None:
        raise FileNotFoundError(f"no kept weights for {run.label}; run `llamanat study --only text`")
    return model


SMOOTHED = ("witten_bell", "kneser_ney")
HALVES = {"val": "validation", "test": "test"}


def ngram_table(baselines: dict, trained: dict[str, float] | None = None, half: str = "test") -> pd.DataFrame:
    """Bits per character on the held-out `half` of the counted models in `baselines`
    (`ngram.load_ngram_baselines()`): a uniform guess, then orders 1 (unigram) to 5, with
    Witten–Bell and Kneser–Ney smoothing side by side, and below them the trained models
    in `trained` (row label -> loss in nats per character on the same half), in bits."""
    if half not in ("val", "test"):
        raise ValueError(f"half must be 'val' or 'test', got {half!r}")
    orders = sorted(baselines["witten_bell"], key=int)
    name = {"1": "unigram (character frequencies)"}
    rows = {f"uniform over {baselines['vocab']} characters": (baselines["uniform"]["bits"],) * 2}
    rows |= {name.get(n, f"{n}-gram"): tuple(baselines[s][n][half]["bits"] for s in SMOOTHED)
             for n in orders}
    table = pd.DataFrame(rows, index=["Witten–Bell", "Kneser–Ney"]).T
    for label, nats in (trained or {}).items():
        table.loc[label] = nats / math.log(2)
    return table.rename_axis(f"bits per character, held-out {HALVES[half]} half")
