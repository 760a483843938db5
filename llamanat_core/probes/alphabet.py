"""The answer alphabet: `name` and `copy` see the same items; only the
answer token differs. Checked on the data itself, split by split."""
from __future__ import annotations

import pandas as pd
import torch

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


# ---------------------------------------------------------------- the trained models at 1,200 steps
#
# The study keeps no weights of the alphabet runs. Their training is deterministic (one
# torch thread, the compiled step of the study), so the chapter replays the runs it looks
# inside up to the verdicts' checkpoint and keeps those weights here. `save_checkpoint`
# checks every replay against the committed run file (the first 100 per-step losses and
# the training loss at 1,200 must be bit-identical) before writing anything.

CHECKPOINT = 1_200  # the study's fixed checkpoint, where the accuracy verdicts are taken
CHECKPOINT_VARIANTS = ("llama", "untied")  # tied and untied head, both formulations
FORMULATIONS = ("name", "copy")


def _root():
    from ..study.cache import ROOT

    return ROOT


def checkpoint_dir():
    """Where the replayed checkpoints are committed: artifacts/weights/alphabet."""
    return _root() / "artifacts" / "weights" / "alphabet"


def checkpoint_run(variant: str, answer: str, seed: int):
    """The study's alphabet run (recall, finite data, the committed budget)."""
    from ..study import Run

    if answer not in FORMULATIONS:
        raise ValueError(f"answer must be one of {FORMULATIONS}, got {answer!r}")
    return Run("recall", variant, seed, answer=answer)


def checkpoint_path(variant: str, answer: str, seed: int, weights_dir=None):
    from pathlib import Path

    d = checkpoint_dir() if weights_dir is None else Path(weights_dir)
    return d / f"{variant}_{answer}_seed{seed}_step{CHECKPOINT}.safetensors"


def replay(run, steps: int = CHECKPOINT):
    """Train `run` exactly as the study did, for `steps` steps, without evaluating (an
    evaluation does not touch the training state). Returns the model, in eval mode, and
    its per-step training losses."""
    from ..train import setup
    from ..util import torch_threads

    with torch_threads(1):
        start = setup(run.config, run.spec, run.seed, run.budget, fast=True, compile=run.compile)
        losses = start.train(steps)
    return start.model.eval(), losses


def check_replay(run, losses, cache_dir=None) -> None:
    """Raise unless `losses` are the committed run's: its kept first losses and its
    training loss at the checkpoint, bit for bit."""
    import json

    from ..study import STUDY_DIR, run_path

    entry = json.loads(run_path(STUDY_DIR if cache_dir is None else cache_dir, run).read_text())
    kept = entry["losses"]
    at = [c for c in entry["curve"] if c["step"] == len(losses)]
    if losses[:len(kept)] != kept or not at or losses[-1] != at[0]["train_loss"]:
        raise ValueError(f"the replay of {run.label} differs from its committed run "
                         f"(another CPU, thread count or torch build?)")


def save_checkpoint(variant: str, answer: str, seed: int, weights_dir=None) -> None:
    """Replay one alphabet run to the checkpoint, check it, write its weights atomically
    (a tied head stored once, as the embedding)."""
    import json

    from safetensors.torch import save

    from ..util import atomic_write_bytes

    run = checkpoint_run(variant, answer, seed)
    model, losses = replay(run)
    check_replay(run, losses)
    tied = run.config.tie_embeddings
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if k != "lm_head.weight" or not tied}
    meta = json.dumps({"run": run.key, "label": run.label, "step": len(losses)}, sort_keys=True)
    path = checkpoint_path(variant, answer, seed, weights_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, save(state, metadata={"run": meta}))


def load_checkpoint(variant: str, answer: str, seed: int, weights_dir=None):
    """The committed weights of an alphabet run at the checkpoint, as an eval-mode model."""
    from ..study import load_model

    run = checkpoint_run(variant, answer, seed)
    path = checkpoint_path(variant, answer, seed, weights_dir)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint {path.name}; regenerate with "
                                f"`python -m llamanat_core.probes.alphabet`")
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


def scored_items(seed: int, answer: str, n_pairs: int = 4, budget: Budget = Budget()):
    """The test items the study scores a run of this seed on (prompt, answer)."""
    n_train = budget.n_train if n_pairs == 4 else 0
    data = Recall(seed, n_pairs, answer).splits(n_train, budget.n_val, budget.n_test).test
    return data.prompt, data.answer[:, 0]


def main(argv=None) -> int:
    """Regenerate every checkpoint the chapter reads (minutes per run on a busy CPU)."""
    import argparse

    from ..study import SEEDS

    ap = argparse.ArgumentParser(prog="python -m llamanat_core.probes.alphabet",
                                 description=main.__doc__)
    ap.add_argument("--variants", default=",".join(CHECKPOINT_VARIANTS))
    ap.add_argument("--answers", default=",".join(FORMULATIONS))
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--missing-only", action="store_true")
    a = ap.parse_args(argv)
    for variant in a.variants.split(","):
        for answer in a.answers.split(","):
            for seed in (int(s) for s in a.seeds.split(",")):
                if a.missing_only and checkpoint_path(variant, answer, seed).exists():
                    continue
                save_checkpoint(variant, answer, seed)
                print(f"saved {checkpoint_path(variant, answer, seed).name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
