"""The rotation sweep: what each RoPE base does to the angles, as arithmetic.

Pair i of a head turns by theta^(-2i/d) radians per position. The base decides how
many pairs still tell two positions of a recall item apart (they turn a visible angle
between them) and how many turn past a full circle (positions far apart look alike to
that pair). Nothing here is trained: it is the column a reader can redo by hand.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from ...analysis.text_comparisons import labelled_runs
from ...data.tasks import TRAIN_PAIRS, VALUE0, Recall
from ...model.config import variant_config
from ...model.model import TinyLlama
from ...model.positional import inverse_frequencies, slowest_period
from ...study import EXTRAPOLATE

HEAD_DIM = 16
LONGEST = 37  # positions 0..37: the 12-pair item (37 tokens before the answer) and its answer


def pair_angles(theta: float, head_dim: int = HEAD_DIM, positions: int = LONGEST + 1) -> torch.Tensor:
    """(positions, head_dim/2) radians: the angle pair i has turned at position p, p * theta^(-2i/d)."""
    p = torch.arange(positions, dtype=torch.float64)
    inv = inverse_frequencies(head_dim, theta).double()
    return torch.outer(p, inv)


def parameters_per_base(thetas, variant: str = "llama") -> dict[float, int]:
    """Parameters of the model at each base (RoPE has none, so every base gives the same count)."""
    return {float(t): TinyLlama(variant_config(variant, rope_theta=float(t)), seed=None).num_parameters()
            for t in thetas}


def period_table(thetas, head_dim: int = HEAD_DIM, span: int = LONGEST) -> pd.DataFrame:
    """One row per base: the slowest pair's period, its angle across `span` positions, and
    how many pairs turn a full circle or more across that span (they wrap around)."""
    params = parameters_per_base(thetas)
    rows = []
    for t in thetas:
        angles = pair_angles(t, head_dim, span + 1)[-1]  # each pair's angle at offset `span`
        rows.append({
            "base": float(t),
            "slowest period (positions)": slowest_period(head_dim, t),
            f"slowest pair over {span} positions (degrees)": math.degrees(float(angles[-1])),
            f"pairs past a full turn over {span} positions": int((angles >= 2 * math.pi).sum()),
            "parameters": params[float(t)],
        })
    return pd.DataFrame(rows).set_index("base")


def base_label(theta: float) -> str:
    """10000.0 -> '10,000' (the base as the book writes it)."""
    return f"{theta:,.0f}"


# ---------------------------------------------------------------- which pairs hold a match steady

QUARTER_TURN = math.pi / 2


def value_offsets(n_pairs: int) -> list[int]:
    """How far back each value of an n-pair item sits from the position that reads the
    answer (the probe key, the prompt's last token): `k0 v0 | k1 v1 | ... = kq` puts
    value j at position 3j + 1 and the probe key at 3n."""
    ids = Recall(0, n_pairs).splits(0, 0, 1).test.prompt[0]
    last = len(ids) - 1
    return sorted(last - int(p) for p in torch.nonzero((ids >= VALUE0) & (ids < VALUE0 + 16)).ravel())


def steady_pairs(theta: float, n_pairs: int, head_dim: int = HEAD_DIM) -> int:
    """How many channel pairs turn less than a quarter turn between the nearest and the
    farthest value of an n-pair item, seen from the answer position. Such a pair can be
    aligned so that every value's angle stays within an eighth of a turn of the best
    one, scoring a match nearly alike wherever the value sits; a pair that turns further
    scores the same key differently at different distances."""
    offsets = value_offsets(n_pairs)
    width = offsets[-1] - offsets[0]
    inv = inverse_frequencies(head_dim, theta).double()
    return int((inv * width < QUARTER_TURN).sum())


def steady_table(thetas, pair_counts=(TRAIN_PAIRS, *EXTRAPOLATE), head_dim: int = HEAD_DIM) -> pd.DataFrame:
    """Bases × item lengths: the pairs that turn less than a quarter turn across the item's
    values (`steady_pairs`), out of head_dim/2."""
    return pd.DataFrame({f"{n} pairs": [steady_pairs(t, n, head_dim) for t in thetas]
                         for n in pair_counts}, index=pd.Index([float(t) for t in thetas], name="base"))


def window_rise(text_runs: pd.DataFrame) -> pd.DataFrame:
    """What a longer window costs each text arm: its mean loss at two and at four trained
    windows (`loss_2x`, `loss_4x`) minus its mean loss at the trained one, one row per arm
    (`text_comparisons.labelled_runs`'s label)."""
    means = labelled_runs(text_runs).groupby("label")[["loss_end", "loss_2x", "loss_4x"]].mean()
    return means[["loss_2x", "loss_4x"]].sub(means.loss_end, axis=0)
