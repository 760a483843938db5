"""The text study's questions, fixed before its first run, and their decisions.

Each arm is compared with the reference (`llama`, RoPE base 10,000) seed by seed on the
held-out test loss of `text_train.TEXT_ENDPOINTS`, in nats per character:

- **primary**: `loss_end`, the loss at the end of the budget;
- **secondary**: `loss_half` (speed: the loss at half the budget), `loss_2x` and `loss_4x`
  (extrapolation to windows two and four times the training context; not defined for the
  learned position table, which has no rows there).

**The margin.** Two arms are called equivalent when the interval of their mean difference
lies inside ±`TEXT_MARGIN` nats per character. The published scale: GLU variants beat a
GELU feed-forward by about 0.04 nats per subword token (Shazeer 2020), and a subword token
of English holds about four characters, so the smallest published effect among these
mechanisms is about 0.01 nats per character. A difference inside that is smaller than any
effect the papers report. The pilot (`benchmarks/text_pilot.py`: seeds 1000–1002, outside
the study; `artifacts/study/text_pilot.json`) put the reference's loss at 1.75–1.77 nats
per character with a seed spread of about 0.013, and the paired differences' spread at
0.003 (LayerNorm) to 0.03 (the GELU feed-forward): the standard error of a ten-seed mean is
then 0.001–0.01, so a quiet pair can show equivalence within ±0.01 and a noisy one is
decided only by an effect of several hundredths. Pairing matters: the paired spread is up
to five times smaller than the seed spread of one arm.

**The analysis.** The same paired design as the puzzles (`sequential`): an exact sign-flip
test on seeds 0–9, thirty more seeds for a primary comparison left undecided, Holm within
each family (the matrix controls; the rotation bases), intervals inverted from the test.
Losses are compared in integer units of `TEXT_UNIT` nats so the sign-flip counts are exact.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .comparisons import Endpoint

TEXT_UNIT = 1e-4  # nats per character: the differences' rounding, far below any effect
TEXT_MARGIN = 0.01  # nats per character (the module's docstring says why)
REFERENCE_THETA = 10_000.0

TEXT_LOSS = Endpoint("loss_end", "loss_end", TEXT_UNIT, False, False, TEXT_MARGIN)
TEXT_SPEED = Endpoint("loss_half", "loss_half", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_2X = Endpoint("loss_2x", "loss_2x", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_4X = Endpoint("loss_4x", "loss_4x", TEXT_UNIT, False, False, TEXT_MARGIN, primary=False)
TEXT_QUESTIONS = (TEXT_LOSS, TEXT_SPEED, TEXT_2X, TEXT_4X)
LOSS_BOUNDS = (-int(math.ceil(math.log(81) / TEXT_UNIT)), int(math.ceil(math.log(81) / TEXT_UNIT)))
"""A mean difference of two losses lies within ±ln 81 (every loss between 0 and a uniform
guess's ln 81 once trained past it); the interval search stays inside."""


def text_comparisons(results: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, pd.DataFrame]]:
    """(family, control label, reference rows, control rows) of every text comparison at
    the reference learning rate: each matrix control, then each rotation base."""
    rows = results[results.lr_scale == 1.0]
    ref = rows[(rows.variant == "llama") & (rows.rope_theta == REFERENCE_THETA)]
    out = []
    for variant, g in rows[rows.variant != "llama"].groupby("variant", sort=False):
        out.append(("text", variant, ref, g))
    bases = rows[(rows.variant == "llama") & (rows.rope_theta != REFERENCE_THETA)]
    for theta, g in bases.groupby("rope_theta"):
        out.append(("text_sweep", f"base {theta:,.0f}", ref, g))
    return out


def paired_units(ref: pd.DataFrame, ctl: pd.DataFrame, column: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The seeds both arms have a value for, and control − reference in TEXT_UNITs."""
    pair = ref[["seed", column]].merge(ctl[["seed", column]], on="seed", suffixes=("_r", "_c"))
    pair = pair.dropna().sort_values("seed")
    d = np.round((pair[f"{column}_c"] - pair[f"{column}_r"]).to_numpy() / TEXT_UNIT).astype(np.int64)
    return pair, d
