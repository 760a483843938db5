"""How a chapter's conclusions stay true: `claim(premise, sentence)`.

Each sentence an author writes about the data is followed by a hidden cell asserting
what the sentence rests on. When a re-run stops supporting it, the chapter fails and
names the sentence; on a reader's own run (other seeds, another budget) it warns instead.
"""
from __future__ import annotations

import warnings

import numpy as np


class ClaimError(AssertionError):
    """A sentence of a chapter's text is no longer supported by the data."""


class ClaimWarning(UserWarning):
    """A sentence of the text that a reader's own run does not support."""


_COMMITTED_RUN = [True]  # set by the chapter's parameter check (`set_committed_run`)


def set_committed_run(committed: bool) -> None:
    """Whether the chapter now executing reads the committed study with every seed, the
    data its text was written about. `execute.check_chapter_parameters` sets it; on any
    other run every claim warns instead of failing."""
    _COMMITTED_RUN[0] = bool(committed)


def claim(premise, sentence: str) -> None:
    """Assert the premise of one sentence of the text.

    `premise` is a bool computed from the data; `sentence` is the sentence (or its gist)
    as the reader sees it. False raises `ClaimError` quoting the sentence; in a chapter
    executed on other data than the committed study's every seed (a reader's own re-run,
    where the committed text need not hold: see `set_committed_run`), it warns instead,
    so the reader sees which sentences their run does not support.
    """
    if isinstance(premise, (np.bool_, bool)):
        ok = bool(premise)
    else:
        raise TypeError(f"claim premise must be a bool, got {type(premise).__name__} "
                        f"(for the sentence {sentence!r})")
    if ok:
        return
    message = f"the text says {sentence!r}, but the data no longer support it"
    if _COMMITTED_RUN[0]:
        raise ClaimError(message)
    # a fixed location: the warning text in an executed notebook must not carry the
    # kernel's temporary file name (it changes every execution)
    warnings.warn_explicit(message, ClaimWarning, filename="claim", lineno=0)
