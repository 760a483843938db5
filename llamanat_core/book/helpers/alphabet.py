"""The answer alphabet: `name` and `copy` see the same items; only the
answer token differs. Checked on the data itself, split by split."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ...data.tasks import ANSWER0, TRAIN_PAIRS, VALUE0, Recall
from ...study import EXTRAPOLATE, load_model
from ...study.checkpoints import (  # noqa: F401  (the chapter reads them from here)
    CHECKPOINT,
    CHECKPOINT_VARIANTS,
    FORMULATIONS,
    checkpoint_dir,
    checkpoint_path,
    checkpoint_run,
)
from ...train.loop import Budget, TaskSpec, run_splits
from ..mechanism import recall_attention


def formulation_check(seeds, pair_counts=(TRAIN_PAIRS, EXTRAPOLATE[0]),
                      budget: Budget = Budget()) -> pd.DataFrame:
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


# ---------------------------------------------------------------- the trained models at 1,200 steps
#
# The study keeps no weights of the alphabet runs; `study.checkpoints` replays the runs the
# chapter looks inside up to the verdicts' checkpoint, checks every replay against the
# committed run file and commits the weights. This module only reads them.

def load_checkpoint(variant: str, answer: str, seed: int, weights_dir=None):
    """The committed weights of an alphabet run at the checkpoint, as an eval-mode model."""
    run = checkpoint_run(variant, answer, seed)
    path = checkpoint_path(variant, answer, seed, weights_dir)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint {path.name}; regenerate with "
                                f"`python -m llamanat_core.study.checkpoints`")
    return load_model(path, run.config)


# ---------------------------------------------------------------- what the wrong answers are

KINDS = ("right", "another value of the item", "a value not in the item", "another token")


def answer_ids(values: torch.Tensor, answer: str) -> torch.Tensor:
    """The answer token of each value token under a formulation."""
    return values + ANSWER_OFFSET if answer == "name" else values


def answer_kinds(prompt: torch.Tensor, predicted: torch.Tensor, target: torch.Tensor,
                 answer: str) -> list[str]:
    """What each predicted answer is (`KINDS`): the right one; the answer of another
    value of the same item (the lookup picked the wrong pair); the answer of a value the
    item does not hold (right alphabet, but not one of the item's candidates); or any
    other token (a key, a control token, the other formulation's symbol)."""
    if answer not in FORMULATIONS:
        raise ValueError(f"answer must be one of {FORMULATIONS}, got {answer!r}")
    lo = VALUE0 + (ANSWER_OFFSET if answer == "name" else 0)
    out = []
    for p, y, t in zip(prompt.tolist(), predicted.tolist(), target.tolist()):
        candidates = {v + (ANSWER_OFFSET if answer == "name" else 0)
                      for v in p if VALUE0 <= v < VALUE0 + ANSWER_OFFSET}
        if t not in candidates:
            raise ValueError(f"target {t} is not the answer of a value in its prompt {p}")
        if y == t:
            out.append(KINDS[0])
        elif y in candidates:
            out.append(KINDS[1])
        elif lo <= y < lo + ANSWER_OFFSET:
            out.append(KINDS[2])
        else:
            out.append(KINDS[3])
    return out


@torch.no_grad()
def answer_probabilities(model, prompt: torch.Tensor) -> torch.Tensor:
    """(items, vocab): the model's softmax at the answer position."""
    return torch.softmax(model(prompt)[:, -1].double(), dim=-1)


@torch.no_grad()
def answer_profile(model, prompt: torch.Tensor, target: torch.Tensor, answer: str) -> dict:
    """One model on a set of items: how often its greedy answer is of each kind, and the
    mean probability it puts on the right answer, on each other value of the item, and on
    each value the item does not hold (per token, so 3 and 12 candidates compare)."""
    probs = answer_probabilities(model, prompt)
    predicted = probs.argmax(-1)
    kinds = answer_kinds(prompt, predicted, target, answer)
    vals = prompt[:, 1::3]  # the value tokens sit at positions 1, 4, 7, ...
    assert ((vals >= VALUE0) & (vals < VALUE0 + ANSWER_OFFSET)).all()
    cand = answer_ids(vals, answer)
    lo = VALUE0 + (ANSWER_OFFSET if answer == "name" else 0)
    alphabet = probs[:, lo:lo + ANSWER_OFFSET]
    p_right = probs.gather(1, target[:, None])[:, 0]
    p_item = probs.gather(1, cand).sum(1) - p_right
    p_absent = alphabet.sum(1) - probs.gather(1, cand).sum(1)
    n_pairs = vals.shape[1]
    return {"items": len(kinds), **{k: kinds.count(k) for k in KINDS},
            "p right": float(p_right.mean()),
            "p per other value of the item": float((p_item / (n_pairs - 1)).mean()),
            "p per value not in the item": float((p_absent / (ANSWER_OFFSET - n_pairs)).mean()),
            "p outside the alphabet": float((1 - alphabet.sum(1)).mean())}


def scored_items(seed: int, answer: str, n_pairs: int = TRAIN_PAIRS, budget: Budget = Budget()):
    """The test items the study scores a run of this seed on (prompt, answer): `fit`'s
    own test set at the training length, its extrapolation set at any other."""
    longer = None if n_pairs == TRAIN_PAIRS else n_pairs
    data = run_splits(TaskSpec("recall", TRAIN_PAIRS, answer), seed, budget, longer)[1].test
    return data.prompt, data.answer[:, 0]


def queried_mass(model, seed: int) -> float:
    """The strongest head's attention mass on the queried value, seen from the position
    that predicts the answer (averaged over the seed's validation items): how far a model
    has built the lookup, as one number per model."""
    a = recall_attention(model, seed)
    return float(a[a.role == "queried value"].mass.max())


# ---------------------------------------------------------------- the checkpointed runs, looked inside

def checkpoint_profiles(seeds, variants=CHECKPOINT_VARIANTS, answers=FORMULATIONS,
                        load=load_checkpoint) -> pd.DataFrame:
    """Every checkpointed run looked inside, one row per (variant, answer, seed) in that
    order: its `answer_profile` on the test items the study scored it on, its `accuracy`
    there, and how far it has built the lookup (`queried value`, `queried_mass`).
    `load(variant, answer, seed)` gives the model (the committed checkpoint by default)."""
    rows = []
    for v in variants:
        for a in answers:
            for s in seeds:
                model = load(v, a, s)
                rows.append({"variant": v, "answer": a, "seed": s,
                             **answer_profile(model, *scored_items(s, a), a),
                             "queried value": queried_mass(model, s)})
    out = pd.DataFrame(rows)
    out.insert(len(out.columns) - 1, "accuracy", out.right / out["items"])
    return out


def wrong_answer_table(profiles: pd.DataFrame, rounded: bool = True) -> pd.DataFrame:
    """Per variant and formulation: the wrong answers, the share (%) of each wrong kind, and
    the mean probability per other value of the item and per value not in it (rounded to
    1 and 3 decimals unless `rounded` is False)."""
    by = profiles.groupby(["variant", "answer"], sort=False)
    wrong = by[list(KINDS[1:])].sum()
    shares = {f"{k} (%)": 100 * wrong[k] / wrong.sum(axis=1) for k in KINDS[1:]}
    probabilities = by[["p per other value of the item", "p per value not in the item"]].mean()
    if rounded:
        shares = {k: s.round(1) for k, s in shares.items()}
        probabilities = probabilities.round(3)
    return pd.DataFrame({"wrong answers": wrong.sum(axis=1), **shares}).join(probabilities)


def replay_matches(profiles: pd.DataFrame, final_rows: pd.DataFrame) -> list[bool]:
    """For each profiled run: does its replayed accuracy equal the test accuracy the study
    recorded for it (`final_rows`, one row per variant, answer and seed)?"""
    recorded = final_rows.set_index(["variant", "answer", "seed"]).test_acc
    return [bool(np.isclose(r.right / r["items"], recorded.loc[(r.variant, r.answer, r.seed)]))
            for _, r in profiles.iterrows()]
