"""The answer alphabet: `name` and `copy` see the same items; only the
answer token differs. Checked on the data itself, split by split."""
from __future__ import annotations

import pandas as pd

from ..tasks import ANSWER0, VALUE0, Recall
from ..train import Budget


def formulation_check(seeds, pair_counts=(4, 8), budget: Budget = Budget()) -> pd.DataFrame:
    """One row per (seed, pairs, split): are the `name` and `copy` prompts identical, by how
    many ids does each name answer sit above its copy answer, and does the answer token
    occur in its own prompt? The training length gets every split; longer lengths only
    the test split, as the study scores them."""
    rows = []
    for seed in seeds:
        for n in pair_counts:
            sizes = (budget.n_train, budget.n_val, budget.n_test) if n == pair_counts[0] \
                else (0, 0, budget.n_test)
            name = Recall(seed, n, "name").splits(*sizes)
            copy = Recall(seed, n, "copy").splits(*sizes)
            for split in ("train", "val", "test"):
                a, b = getattr(name, split), getattr(copy, split)
                if len(a) == 0:
                    continue
                offsets = (a.answer - b.answer).unique().tolist()
                rows.append({
                    "seed": seed, "pairs": n, "split": split, "items": len(a),
                    "identical prompts": bool((a.prompt == b.prompt).all()),
                    "name − copy answer id": offsets[0] if len(offsets) == 1 else None,
                    "copy answer in its prompt": int((b.prompt == b.answer).any(dim=1).sum()),
                    "name answer in its prompt": int((a.prompt == a.answer).any(dim=1).sum()),
                })
    return pd.DataFrame(rows)


ANSWER_OFFSET = ANSWER0 - VALUE0  # a value symbol's private answer symbol sits this many ids above it
