"""The alphabet chapter's replayed checkpoints: where they are, written here, read by
`book.helpers.alphabet`.

The study keeps no weights of the alphabet runs. Their training is deterministic (one
torch thread, the compiled step of the study), so the runs the chapter looks inside are
replayed up to the verdicts' checkpoint (1,200 steps) and their weights committed under
artifacts/weights/alphabet. `save_checkpoint` checks every replay against the committed
run file (the first per-step losses and the training loss at the checkpoint must be
bit-identical) before writing anything.

    python -m llamanat_core.study.checkpoints [--missing-only]   # minutes per run
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..paths import ALPHABET_WEIGHTS_DIR, STUDY_DIR
from ..train.loop import setup
from ..util import atomic_write_bytes, torch_threads
from .run import SEEDS, Run
from .run_files import run_path
from .weights import weights_bytes

CHECKPOINT = 1_200  # the study's fixed checkpoint, where the accuracy verdicts are taken
CHECKPOINT_VARIANTS = ("llama", "untied")  # tied and untied head, both formulations
FORMULATIONS = ("name", "copy")


def checkpoint_dir() -> Path:
    """Where the replayed checkpoints are committed: artifacts/weights/alphabet."""
    return ALPHABET_WEIGHTS_DIR


def checkpoint_run(variant: str, answer: str, seed: int) -> Run:
    """The study's alphabet run (recall, finite data, the committed budget)."""
    if answer not in FORMULATIONS:
        raise ValueError(f"answer must be one of {FORMULATIONS}, got {answer!r}")
    return Run("recall", variant, seed, answer=answer)


def checkpoint_path(variant: str, answer: str, seed: int, weights_dir=None) -> Path:
    d = checkpoint_dir() if weights_dir is None else Path(weights_dir)
    return d / f"{variant}_{answer}_seed{seed}_step{CHECKPOINT}.safetensors"


def replay(run, steps: int = CHECKPOINT):
    """Train `run` exactly as the study did, for `steps` steps, without evaluating (an
    evaluation does not touch the training state). Returns the model, in eval mode, and
    its per-step training losses."""
    with torch_threads(1):
        start = setup(run.config, run.spec, run.seed, run.budget, fast=True, compile=run.compile)
        losses = start.train(steps)
    return start.model.eval(), losses


def check_replay(run, losses, cache_dir=None) -> None:
    """Raise unless `losses` are the committed run's: its kept first losses and its
    training loss at the checkpoint, bit for bit."""
    entry = json.loads(run_path(STUDY_DIR if cache_dir is None else cache_dir, run).read_text())
    kept = entry["losses"]
    at = [c for c in entry["curve"] if c["step"] == len(losses)]
    if losses[:len(kept)] != kept or not at or losses[-1] != at[0]["train_loss"]:
        raise ValueError(f"the replay of {run.label} differs from its committed run "
                         f"(another CPU, thread count or torch build?)")


def save_checkpoint(variant: str, answer: str, seed: int, weights_dir=None) -> None:
    """Replay one alphabet run to the checkpoint, check it, write its weights atomically
    (a tied head stored once, as the embedding)."""
    run = checkpoint_run(variant, answer, seed)
    model, losses = replay(run)
    check_replay(run, losses)
    path = checkpoint_path(variant, answer, seed, weights_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, weights_bytes(run, model, len(losses)))


def main(argv=None) -> int:
    """Regenerate every checkpoint the chapter reads (minutes per run on a busy CPU)."""
    ap = argparse.ArgumentParser(prog="python -m llamanat_core.study.checkpoints",
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
