"""Looking inside the tuned text study's models: where in a window the loss falls, and what
each arm writes from the same prompt.

`loss_by_position` scores every position of held-out windows apart, so a rotation base
that reads the far context badly shows as a curve that stops falling early. `arm_samples`
puts several arms' continuations of one prompt side by side, greedy and sampled, through
the package's sampling code (`sampling.sample_text`), with one sampling seed for every arm
so their texts differ by the model alone.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..analysis.scorecard import settled_rates
from ..analysis.text_comparisons import text_arm
from ..data.text import decode, encode
from ..model.config import SIZES
from ..model.model import TinyLlama
from ..paths import WEIGHTS_DIR
from ..study.text_recipe import tuned_run
from ..study.weights import load_weights, weights_path
from ..train.sampling import sample_text


def tuned_model(arm: str, size: str, lr_scale: float, seed: int, steps: int | None = None,
                compile: bool = True, weights_dir: Path | None = None) -> TinyLlama:
    """The kept weights of one tuned-study run (`arm` as the verdicts name it: a variant or
    "base 10") as an eval-mode TinyLlama. The study keeps seeds 0-2 at each arm's best
    rate; `steps` and `compile` name a quick look's runs, `weights_dir` its folder."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    run = tuned_run(*text_arm(arm), size, float(lr_scale), seed, steps, keep=True, compile=compile)
    weights_dir = Path(WEIGHTS_DIR if weights_dir is None else weights_dir)
    model = load_weights(run, weights_dir)
    if model is None:
        raise FileNotFoundError(f"no kept weights for {arm} at {size}, rate {lr_scale}, seed {seed}: "
                                f"{weights_path(run, weights_dir)} is missing")
    return model


def settled_models(runs: pd.DataFrame, size: str = "S", seed: int = 0,
                   weights_dir: Path | None = None) -> dict[str, TinyLlama]:
    """Arm label -> the model of `seed` at the arm's selected rate, for every arm whose
    bracket at `size` has settled, in the scorecard's order (the reference first). `runs`
    is the tuned study's frame (`study.load_tuned_results`); an arm settled but whose
    weights are still to be trained again is left out."""
    out = {}
    for arm, scale in settled_rates(runs, size).items():
        try:
            out[arm] = tuned_model(arm, size, scale, seed, weights_dir=weights_dir)
        except FileNotFoundError:
            continue
    return out


@torch.no_grad()
def loss_by_position(model: TinyLlama, windows: torch.Tensor, batch: int = 256) -> np.ndarray:
    """Mean next-character loss (nats) at each position 0..T-1 over `windows` (N, T + 1):
    position t predicts character t + 1 from characters 0..t. Position 0 is scored without
    context: it reads only its own character, so its loss is a bigram model's at best;
    every later position reads one character more than the one before."""
    if windows.dim() != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows must be (N, T + 1) with T >= 1, got shape {tuple(windows.shape)}")
    was_training = model.training
    model.eval()
    total = torch.zeros(windows.shape[1] - 1, dtype=torch.float64)
    for chunk in windows.split(batch):
        logits = model(chunk[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none")  # (B, T)
        total += loss.double().sum(0)
    model.train(was_training)
    return (total / len(windows)).numpy()


def _check_samples(models: dict, prompt: str, n_chars: int) -> None:
    if not models:
        raise ValueError("models must name at least one arm")
    if not isinstance(n_chars, int) or n_chars < 1:
        raise ValueError(f"n_chars must be a positive whole number, got {n_chars!r}")
    if not prompt:
        raise ValueError("prompt must hold at least one character")


def arm_samples(models: dict[str, TinyLlama], prompt: str, n_chars: int, seed: int = 0,
                temperature: float = 1.0) -> pd.DataFrame:
    """One row per arm (label, greedy, sampled): `n_chars` characters following `prompt`,
    greedy (the argmax) and drawn at `temperature` with the generator seeded by `seed`,
    the same seed for every arm, so the arms' texts differ by their weights alone."""
    _check_samples(models, prompt, n_chars)
    ids = encode(prompt)  # (P,)
    rows = []
    for label, model in models.items():
        greedy = sample_text(model, ids, n_chars, temperature=0.0)
        drawn = sample_text(model, ids, n_chars, temperature=temperature, seed=seed)
        rows.append({"label": label, "greedy": decode(greedy), "sampled": decode(drawn)})
    return pd.DataFrame(rows, columns=["label", "greedy", "sampled"])


def samples_text(samples: pd.DataFrame, names: dict[str, str], default: str = "reference") -> str:
    """`arm_samples` as the chapter prints them: per arm its name (`names`, else
    `default`), then its greedy and its sampled text, each on one line (a line break of the
    novel shown as a space), a blank line between arms."""
    one_line = lambda t: t.replace("\n", " ")  # noqa: E731
    return "\n".join(f"{names.get(r.label, default)}\n  greedy:  {one_line(r.greedy)}\n"
                     f"  sampled: {one_line(r.sampled)}\n" for r in samples.itertuples())


def distinct_share(text: str) -> float:
    """Distinct words over words: near 1 for text that never repeats a word, small for a
    loop ("the same the same ..." is 2 of 20 in twenty words). Words are split on spaces."""
    words = text.split()
    if not words:
        raise ValueError("text holds no word")
    return len(set(words)) / len(words)


__all__ = ["tuned_model", "settled_models", "loss_by_position", "arm_samples", "samples_text",
           "distinct_share"]
