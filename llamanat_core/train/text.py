"""Training on text: next-character loss, a token budget, and the held-out endpoints.

The puzzles' trainer grades answers; this one measures what LLaMA's choices were made to
lower: cross-entropy of the next token, on every position, in nats per character. Every
arm gets the same token budget and the same schedule (linear warm-up, then a cosine down
to a tenth of the peak rate); nothing is tuned per arm except in the learning-rate check,
which scales the peak rate of every arm alike.

The endpoints, fixed before the first text run (`TEXT_ENDPOINTS`):
- primary: held-out test loss at the end of the budget, at the training context;
- speed: the same loss at half the budget;
- extrapolation: test loss on windows 2× and 4× the training context, the model
  unchanged. A learned position table has no rows past its length, so for that control
  these are not defined (NaN): it cannot read a longer window at all.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from ..data.text import Corpus, gather, load_corpus, training_windows, windows
from ..model.config import Config
from ..model.model import TinyLlama, answer_loss
from .compiled import FastStep
from .loop import PlainStep
from .optim import DECAY
from .schedule import warmup_cosine

TEXT_ENDPOINTS = {
    "loss_end": "held-out test loss at the end of the budget (nats per character; primary)",
    "loss_half": "held-out test loss at half the budget (speed)",
    "loss_2x": "held-out test loss on windows twice the training context (extrapolation)",
    "loss_4x": "held-out test loss on windows four times the training context (extrapolation)",
}
# What the tuned study chooses each arm's rate by, recorded by every run of its recipe
# (weight decay on matrices only): the validation half, never the test half.
SELECTION = {"loss_val": "validation loss at the end of the budget, on the whole validation half"}


def endpoints_of(decay: str) -> set[str]:
    """The endpoints a text run records, by its budget's weight-decay rule."""
    return set(TEXT_ENDPOINTS) | (set(SELECTION) if decay != "all" else set())


@dataclass(frozen=True)
class TextBudget:
    """What every text run gets: `steps` batches of `batch_size` windows of `context`
    characters (800 × 64 × 48 ≈ 2.5 million characters, about 0.7 passes over the
    training novels), AdamW at peak `lr` with warm-up and cosine, clipping at `clip`."""
    steps: int = 800
    batch_size: int = 64
    context: int = 48  # the reference Config's max_seq_len: the learned table fits exactly
    lr: float = 1e-3
    warmup: int = 40
    final_lr: float = 0.1  # the cosine ends at this fraction of the peak rate
    clip: float = 1.0
    eval_every: int = 50
    eval_windows: int = 256  # the dense curve: the first windows of the validation half
    longer: tuple[int, ...] = (2, 4)  # extrapolation windows, as multiples of `context`
    test_windows: int | None = None  # the endpoints read every window of the test half
    decay: str = "all"  # what weight decay touches (`optim.DECAY`): the recipe's is "matrices"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "context", "eval_every", "eval_windows", "test_windows"):
            v = getattr(self, name)
            if name == "test_windows" and v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"TextBudget.{name} must be a positive integer, got {v!r}")
        if not 0 <= self.warmup < self.steps:
            raise ValueError(f"TextBudget.warmup must lie in 0..steps-1, got {self.warmup!r}")
        if not self.lr > 0 or not 0 <= self.final_lr <= 1:
            raise ValueError("TextBudget.lr must be positive and final_lr a fraction in [0, 1]")
        if self.decay not in DECAY:
            raise ValueError(f"TextBudget.decay must be one of {DECAY}, got {self.decay!r}")

    @property
    def half(self) -> int:
        return self.steps // 2

    def lr_at(self, step: int) -> float:
        """The learning rate of step 1..steps: linear warm-up, then a cosine to final_lr."""
        return warmup_cosine(step, self.lr, self.warmup, self.steps, self.final_lr)

    @classmethod
    def for_steps(cls, steps: int | None = None, lr_scale: float = 1.0) -> TextBudget:
        """The full budget, or one cut to `steps` (warm-up and evaluations scaled alike; a
        quick look reads its endpoints on the first `eval_windows` windows of the test half,
        as its curve reads the validation half, not on all of them); `lr_scale` multiplies
        the peak rate (the learning-rate check)."""
        full = cls()
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 2):
            raise ValueError(f"steps must be an integer of at least 2, got {steps!r}")
        if not isinstance(lr_scale, (int, float)) or lr_scale <= 0:
            raise ValueError(f"lr_scale must be a positive number, got {lr_scale!r}")
        if steps is None or steps == full.steps:
            return cls(lr=full.lr * lr_scale)
        return cls(steps=steps, warmup=max(1, steps * full.warmup // full.steps) if steps > 2 else 0,
                   eval_every=max(1, steps // 16), lr=full.lr * lr_scale, test_windows=full.eval_windows)


@torch.no_grad()
def held_out_loss(model: TinyLlama, text: torch.Tensor, context: int, limit: int | None = None,
                  batch: int = 256) -> float:
    """Mean loss in nats per character over non-overlapping windows of `context` characters
    (the first `limit` windows, if given); NaN where the model cannot read such a window
    (a learned position table shorter than `context`)."""
    if model.embed_positions is not None and context > model.cfg.max_seq_len:
        return float("nan")
    was_training = model.training
    model.eval()
    ids = windows(text, context, limit)  # (N, context + 1)
    total = 0.0
    for chunk in ids.split(batch):
        total += answer_loss(model, chunk, None).item() * len(chunk)  # every position
    model.train(was_training)
    return total / len(ids)


@dataclass
class TextFitResult:
    """One text run: the trained model, every training loss, the validation curve and the
    endpoints of `TEXT_ENDPOINTS`."""
    model: TinyLlama
    losses: list[float] = field(default_factory=list)
    val_curve: list[dict] = field(default_factory=list)  # step, train_loss, val_loss
    endpoints: dict = field(default_factory=dict)
    seconds: float = 0.0


def test_losses(model: TinyLlama, corpus: Corpus, budget: TextBudget) -> dict:
    """The end-of-budget endpoints on the test half: the training context and longer."""
    out = {"loss_end": held_out_loss(model, corpus.test, budget.context, budget.test_windows)}
    for k in budget.longer:
        out[f"loss_{k}x"] = held_out_loss(model, corpus.test, k * budget.context, budget.test_windows)
    return out


def text_step(model: TinyLlama, budget: TextBudget, compile: bool = False):
    """The step every text run takes: the puzzles' step on every position, at the budget's
    scheduled rate, clipping and weight decay; compiled (`compiled.FastStep`) or the plain
    loop (`loop.PlainStep`), which is the reference and rounds differently."""
    if compile:
        return FastStep(model, None, budget.lr_at, budget.clip, compile=True, decay=budget.decay)
    return PlainStep(model, None, budget.lr_at, budget.clip, decay=budget.decay)


def train_text(model: TinyLlama, seed: int, budget: TextBudget, corpus: Corpus, steps: int | None = None,
               compile: bool = False):
    """The training loop: yield (step, loss) after each of the first `steps` steps (all of
    the budget by default). The schedule and the windows are the budget's, so a short
    replay is exactly the start of the full run. The model's weights are current after
    every step (the compiled step's flat vector is their storage) until the loop ends."""
    starts = training_windows(corpus.train, budget.context, budget.batch_size, budget.steps, seed)
    model.train()
    step = text_step(model, budget, compile)
    for i in range(1, (steps or budget.steps) + 1):
        loss = step(gather(corpus.train, starts[i - 1], budget.context + 1))  # (B, context + 1)
        yield i, loss.item()
    if isinstance(step, FastStep):
        step.release()  # every parameter gets its own storage back


def fit_text(cfg: Config, seed: int, budget: TextBudget = TextBudget(), corpus: Corpus | None = None,
             progress=None, compile: bool = False) -> TextFitResult:
    """Train one model on the training novels under the budget, measuring the validation
    curve and the endpoints on the way; same seed and thread count, same bits.
    `progress(step, loss)` is called after every step if given; `compile` takes the
    compiled step (the study records which: the two round differently)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    corpus = corpus or load_corpus()
    model = TinyLlama(cfg, seed=seed)
    result = TextFitResult(model)
    t0 = time.perf_counter()
    for step, loss in train_text(model, seed, budget, corpus, compile=compile):
        result.losses.append(loss)
        if progress is not None:
            progress(step, loss)
        if step == budget.half:
            result.endpoints["loss_half"] = held_out_loss(model, corpus.test, budget.context,
                                                          budget.test_windows)
        if step % budget.eval_every == 0 or step == budget.steps:
            since = result.losses[-(step - (result.val_curve[-1]["step"] if result.val_curve else 0)):]
            result.val_curve.append({
                "step": step, "train_loss": sum(since) / len(since),
                "val_loss": held_out_loss(model, corpus.val, budget.context, budget.eval_windows)})
    result.endpoints.update(test_losses(model, corpus, budget))
    if budget.decay != "all":  # the recipe's runs (the first text study chose no rate)
        result.endpoints["loss_val"] = held_out_loss(model, corpus.val, budget.context, budget.test_windows)
    result.seconds = time.perf_counter() - t0
    model.eval()
    return result


def text_training_losses(cfg: Config, seed: int, budget: TextBudget, steps: int,
                         corpus: Corpus | None = None, compile: bool = False) -> list[float]:
    """The first `steps` training losses of the run `fit_text` makes, without evaluating
    (`llamanat verify` compares the plain loop's with a committed text run's)."""
    model = TinyLlama(cfg, seed=seed)
    return [loss for _, loss in train_text(model, seed, budget, corpus or load_corpus(), steps, compile)]


def text_budget_dict(budget: TextBudget) -> dict:
    """The budget as a run's record holds it (its key is a hash of the record): every field,
    but `test_windows` only where a cut budget set it and `decay` only where it is not
    "all", so the first text study's records, and its runs' keys, are what they were before
    those fields existed."""
    d = asdict(budget)
    d["longer"] = list(d["longer"])
    if d["test_windows"] is None:
        del d["test_windows"]
    if d["decay"] == "all":
        del d["decay"]
    return d
