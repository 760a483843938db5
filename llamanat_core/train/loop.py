"""The one training budget, the trainer, and batched cached scoring.

`fit` is the whole experiment of one run: train under the budget, evaluate on the
validation set every `eval_every` steps (the dense curve), score the test set at the
checkpoints, and stop once the run has been solved for a few evaluations in a row
(never before `min_steps`) or at the cap. The plain PyTorch loop (`fast=False`) is the
reference; the default speed path of `compiled.py` computes the same function in fewer,
fused operations, and a test holds the two equal.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..data.tasks import FreshStream, TaskData, make_task
from ..model.config import REGIMES, Config
from ..model.model import TinyLlama, answer_loss
from .compiled import FastStep
from .optim import adamw


@dataclass(frozen=True)
class Budget:
    """What every run gets; nothing is tuned per variant.

    A run trains at least `min_steps` (so the 300/600/900/1,200 test columns exist for
    every run), then goes on until validation accuracy has been >= `solve_at` for
    `solved_evals` evaluations in a row, or until the cap `steps`.
    """
    steps: int = 4800  # the cap
    min_steps: int = 1200
    eval_every: int = 100
    solve_at: float = 0.90
    solved_evals: int = 3
    batch_size: int = 64
    lr: float = 1e-3
    clip: float = 1.0
    n_train: int = 4000  # the finite regime's training set (fresh draws new items instead)
    n_val: int = 200
    n_test: int = 200
    checkpoints: tuple[int, ...] = (300, 600, 900, 1200)
    regime: str = "finite"

    def __post_init__(self) -> None:
        for name in ("steps", "min_steps", "eval_every", "solved_evals", "batch_size",
                     "n_train", "n_val", "n_test"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"Budget.{name} must be a positive integer, got {v!r}")
        if self.min_steps > self.steps:
            raise ValueError(f"Budget.min_steps ({self.min_steps}) must not exceed the cap "
                             f"Budget.steps ({self.steps})")
        if not 0 < self.solve_at <= 1:
            raise ValueError(f"Budget.solve_at must be an accuracy in (0, 1], got {self.solve_at!r}")
        if self.regime not in REGIMES:
            raise ValueError(f"Budget.regime must be one of {REGIMES}, got {self.regime!r}")
        if not self.checkpoints or any(not 0 < c <= self.min_steps for c in self.checkpoints):
            raise ValueError(f"Budget.checkpoints must lie in 1..min_steps={self.min_steps}, "
                             f"got {self.checkpoints}")
        if list(self.checkpoints) != sorted(set(self.checkpoints)):
            raise ValueError(f"Budget.checkpoints must be increasing, got {self.checkpoints}")

    @classmethod
    def for_steps(cls, steps: int | None = None, regime: str = "finite") -> Budget:
        """The full budget (None), or one scaled down to a cap of `steps`: the floor
        becomes min(1,200, steps), checkpoints sit at its quarters, and evaluations
        come about twelve times before the floor."""
        full = cls(regime=regime)
        if steps is None or steps == full.steps:
            return full
        if not isinstance(steps, int) or isinstance(steps, bool) or steps <= 0:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        floor = min(full.min_steps, steps)
        marks = tuple(sorted({max(1, round(floor * q / 4)) for q in (1, 2, 3, 4)}))
        every = full.eval_every if floor >= full.min_steps else max(1, floor // 12)
        return cls(steps=steps, min_steps=floor, eval_every=every, checkpoints=marks, regime=regime)


@dataclass(frozen=True)
class TaskSpec:
    """Which task, at which training length, with which answer formulation."""
    task: str = "recall"
    n_pairs: int = 4
    answer: str = "name"
    extrapolate: tuple[int, ...] = ()  # recall lengths re-scored unchanged after training

    def make(self, seed: int, n_pairs: int | None = None):
        return make_task(self.task, seed, self.n_pairs if n_pairs is None else n_pairs, self.answer)


@dataclass
class FitResult:
    """One run's outcome: the trained model and what was measured on the way.

    The committed run files name these two curves differently, and keep those names
    because the files are data: `test_curve` is stored under "curve" and `val_curve` under
    "dense" (`study.training.train_run`; `results.csv` and `curves.csv` are built from them)."""
    model: TinyLlama
    test_curve: list[dict] = field(default_factory=list)  # test scores: one row per checkpoint (+ stop)
    val_curve: list[dict] = field(default_factory=list)  # validation: one row per evaluation
    losses: list[float] = field(default_factory=list)  # training loss at every step
    solve_step: int | None = None  # first evaluation with val accuracy >= solve_at
    stop_step: int = 0
    seconds: float = 0.0


def batch_order(n_train: int, batch_size: int, steps: int, seed: int) -> torch.Tensor:
    """(steps, batch) example indices: a fresh permutation per epoch from a seeded generator.
    The first k steps do not depend on `steps`, so a longer run extends a shorter one."""
    g = torch.Generator().manual_seed(seed)
    need = steps * batch_size
    perms = [torch.randperm(n_train, generator=g) for _ in range(-(-need // n_train))]
    return torch.cat(perms)[:need].view(steps, batch_size)


@torch.no_grad()
def score(model: TinyLlama, task, data: TaskData) -> float:
    """Accuracy by free-running greedy generation, the whole set at once, with a KV cache."""
    was_training = model.training
    model.eval()
    # one answer token is one forward pass: nothing to cache for later tokens
    generated = model.generate(data.prompt, data.answer_len, use_cache=data.answer_len > 1)
    model.train(was_training)
    correct = task.grade(data.prompt, generated, data.answer)
    return int(correct.sum()) / len(data)  # an exact fraction of the set, as a Python float


@torch.no_grad()
def eval_loss(model: TinyLlama, data: TaskData) -> float:
    return answer_loss(model, data.ids, data.answer_len).item()


@torch.no_grad()
def loss_and_score(model: TinyLlama, task, data: TaskData) -> tuple[float, float]:
    """(eval_loss, score) of one set. With a one-token answer one forward pass gives both:
    the logits at the answer position are the loss's and the greedy answer's."""
    if data.answer_len != 1:
        return eval_loss(model, data), score(model, task, data)
    was_training = model.training
    model.eval()
    logits = model(data.prompt, last=1)  # (B, 1, V)
    model.train(was_training)
    loss = F.cross_entropy(logits[:, 0], data.answer[:, 0]).item()
    correct = task.grade(data.prompt, logits.argmax(-1), data.answer)
    return loss, int(correct.sum()) / len(data)


class PlainStep:
    """The reference step, as a textbook writes it: forward, backward, clip, AdamW.

    `lr` is a constant rate (the puzzles) or a schedule, step -> rate (text: warm-up, then
    a cosine); `answer_len` None trains on every position (text); `decay` picks the
    parameters weight decay touches (`optim.decays`). Called once per step, in order.
    """

    def __init__(self, model: TinyLlama, answer_len: int | None, lr, clip: float,
                 decay: str = "all"):
        self.model, self.answer_len, self.clip = model, answer_len, clip
        self.schedule, self.step = (lr if callable(lr) else None), 0
        self.opt = adamw(model.parameters(), lr(1) if callable(lr) else lr, decay)

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        self.step += 1
        if self.schedule is not None:
            for group in self.opt.param_groups:
                group["lr"] = self.schedule(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss = answer_loss(self.model, ids, self.answer_len)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        return loss.detach()


class _Data:
    """Where batches come from: the finite set in a fixed order, or a fresh stream."""

    def __init__(self, task, splits, budget: Budget, seed: int):
        if budget.regime == "finite":
            order = batch_order(budget.n_train, budget.batch_size, budget.steps, seed)
            self.train, self.order, self.stream = splits.train.ids, order, None
        else:
            self.stream = FreshStream(task, (splits.val, splits.test), seed)
        self.batch_size = budget.batch_size

    def batch(self, step: int) -> torch.Tensor:
        if self.stream is None:
            return self.train[self.order[step - 1]]  # (B, L)
        return self.stream.batch(self.batch_size)  # (B, L)


def run_splits(spec: TaskSpec, seed: int, budget: Budget, n_pairs: int | None = None):
    """(task, splits) of the run (spec, seed) as `fit` draws them: the finite regime's
    training set, then validation and test (the stream's first items in both regimes).
    With `n_pairs` (a recall length of `spec.extrapolate`), the extrapolation sets `fit`
    re-scores the run on: no training items, the same validation and test counts."""
    if n_pairs is not None:
        task = spec.make(seed, n_pairs)
        return task, task.splits(0, budget.n_val, budget.n_test)
    task = spec.make(seed)
    n_train = budget.n_train if budget.regime == "finite" else 0
    return task, task.splits(n_train, budget.n_val, budget.n_test)


class Setup(NamedTuple):
    """One run before its first step: task, splits, initialised model, batches, step."""
    task: object
    splits: object
    model: TinyLlama
    data: _Data
    step: object  # PlainStep or FastStep: loss = step(ids)

    def train(self, steps: int) -> list[float]:
        """Take the first `steps` training steps without evaluating (an evaluation never
        touches the training state) and give every parameter its own storage back."""
        losses = [self.step(self.data.batch(s)).item() for s in range(1, steps + 1)]
        if isinstance(self.step, FastStep):
            self.step.release()
        return losses


def setup(cfg: Config, spec: TaskSpec, seed: int, budget: Budget, fast: bool = True,
          compile: bool | None = None) -> Setup:
    """The run `fit` makes, ready to train: what a replay of its first steps starts from."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    task, splits = run_splits(spec, seed, budget)
    model = TinyLlama(cfg, seed=seed)
    model.train()
    if fast:
        step = FastStep(model, task.answer_len, budget.lr, budget.clip, compile)
    else:
        step = PlainStep(model, task.answer_len, budget.lr, budget.clip)
    return Setup(task, splits, model, _Data(task, splits, budget, seed), step)


def training_losses(cfg: Config, spec: TaskSpec, seed: int, budget: Budget, steps: int,
                    fast: bool = True, compile: bool | None = None) -> list[float]:
    """The first `steps` training losses of the run `fit` makes (the same knobs), without
    evaluating. `llamanat verify` compares the plain loop's (`fast=False`) with a committed run."""
    return setup(cfg, spec, seed, budget, fast, compile).train(min(steps, budget.steps))


def fit(cfg: Config, spec: TaskSpec, seed: int, budget: Budget = Budget(),
        progress=None, fast: bool = True, compile: bool | None = None) -> FitResult:
    """Train one model under the budget; evaluate and score the same weights as it trains.

    Same seed and thread count -> bit-identical curves and weights. `progress`, if given,
    is called as progress(step, loss) after every step (the CLI hangs a bar on it).
    `fast=False` runs the plain loop; `compile` (speed path only, None = follow
    LLAMANAT_COMPILE) is recorded by the study: compiled and eager steps round differently.
    """
    task, splits, model, data, train_step = setup(cfg, spec, seed, budget, fast, compile)
    longer, longer_sets = {}, {}
    for n in spec.extrapolate:
        longer[n], longer_sets[n] = run_splits(spec, seed, budget, n)
    for n, s in longer_sets.items():
        if s.test.ids.shape[1] - 1 > cfg.max_seq_len and cfg.position == "learned":
            raise ValueError(f"extrapolation length {n} pairs does not fit max_seq_len")
    result = FitResult(model)

    def test_row(step: int) -> dict:
        row = {"step": step, "train_loss": result.losses[-1],
               "val_loss": eval_loss(model, splits.val), "test_acc": score(model, task, splits.test)}
        for n, s in longer_sets.items():
            row[f"test_acc_{n}"] = score(model, longer[n], s.test)
        return row

    checkpoints = set(budget.checkpoints)
    streak = 0
    t0 = time.perf_counter()
    for step in range(1, budget.steps + 1):
        result.losses.append(train_step(data.batch(step)).item())
        if progress is not None:
            progress(step, result.losses[-1])
        if step in checkpoints:
            result.test_curve.append(test_row(step))
        if step % budget.eval_every and step != budget.steps:
            continue
        # the dense curve: mean training loss since the last evaluation, validation scores
        since = result.losses[-(step - (result.val_curve[-1]["step"] if result.val_curve else 0)):]
        val_loss, acc = loss_and_score(model, task, splits.val)
        row = {"step": step, "train_loss": sum(since) / len(since), "val_loss": val_loss,
               "val_acc": acc}
        for n, s in longer_sets.items():
            row[f"val_acc_{n}"] = score(model, longer[n], s.val)
        result.val_curve.append(row)
        streak = streak + 1 if acc >= budget.solve_at else 0
        if streak and result.solve_step is None:
            result.solve_step = step
        if step >= budget.min_steps and (streak >= budget.solved_evals or step == budget.steps):
            break
    result.stop_step = step
    if step not in checkpoints:
        result.test_curve.append(test_row(step))  # the scores at the stop
    result.seconds = time.perf_counter() - t0
    if isinstance(train_step, FastStep):
        train_step.release()  # every parameter gets its own storage back
    model.eval()
    return result


def budget_dict(budget: Budget) -> dict:
    d = asdict(budget)
    d["checkpoints"] = list(d["checkpoints"])
    return d
