"""The text task: next-character prediction on Jane Austen's six novels.

The corpus, six checked text files from Debian's `r-cran-janeaustenr`, is `corpus.py`'s
(`read_novel`, `check_corpus`, `write_corpus`; `make corpus` fetches it).

The split is by document, never by random window: the five novels written first train,
and *Persuasion*, the last one Austen finished, is held out whole — its first half
validates, its second half tests. A model is so judged on prose it has never seen a line
of, by the same author. Tokens are single characters: the 81 that occur in the six novels.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import torch

from .corpus import NOVELS, read_novel

# In order of publication (`corpus.NOVELS`): the five written first train.
TRAIN_NOVELS = NOVELS[:5]
HELD_OUT = "persuasion"  # first half validation, second half test
ALPHABET = ("\n !\"&'()*,-.0123456789:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_"
            "abcdefghijklmnopqrstuvwxyz£")
VOCAB_SIZE = len(ALPHABET)  # 81
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


def encode(text: str) -> torch.Tensor:
    """Characters -> token ids (T,); a character outside the alphabet is an error."""
    try:
        return torch.tensor([_INDEX[c] for c in text], dtype=torch.long)
    except KeyError as e:
        raise ValueError(f"character {e.args[0]!r} is not in the text alphabet") from None


def decode(ids) -> str:
    return "".join(ALPHABET[int(i)] for i in ids)


class Corpus(NamedTuple):
    """Token ids of the three splits, each one long 1-D tensor."""
    train: torch.Tensor  # the five training novels, joined by a blank line
    val: torch.Tensor  # Persuasion's first half
    test: torch.Tensor  # Persuasion's second half


def split_held_out(text: str) -> tuple[str, str]:
    """The held-out novel cut at the line break nearest its middle: (validation, test)."""
    middle = text.rfind("\n", 0, len(text) // 2) + 1
    return text[:middle], text[middle:]


@functools.lru_cache(maxsize=2)
def load_corpus(folder: Path | None = None) -> Corpus:
    """The corpus as token ids, split by document (checked against the recorded hashes)."""
    train = "\n\n".join(read_novel(n, folder) for n in TRAIN_NOVELS)
    val, test = split_held_out(read_novel(HELD_OUT, folder))
    return Corpus(encode(train), encode(val), encode(test))


def training_windows(train: torch.Tensor, context: int, batch_size: int, steps: int,
                     seed: int) -> torch.Tensor:
    """(steps, batch) start offsets of the training windows, one fixed order per seed.

    Each window is `context + 1` characters (inputs and their next characters) starting
    anywhere in the training text. The first k steps do not depend on `steps`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, len(train) - context, (steps, batch_size), generator=g)


def gather(text: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    """Windows of `length` tokens at `starts` (B,) -> (B, length)."""
    return text[starts[:, None] + torch.arange(length)]


def windows(text: torch.Tensor, context: int, limit: int | None = None) -> torch.Tensor:
    """Non-overlapping windows of `context + 1` tokens covering the text -> (N, context + 1);
    consecutive windows share one token (the last target is the next input's first). The
    first `limit` windows only, if given."""
    n = (len(text) - 1) // context
    if limit is not None:
        n = min(n, limit)
    starts = torch.arange(n) * context
    return gather(text, starts, context + 1)
