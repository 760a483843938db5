"""The one training budget (SPEC §6), the trainer, and batched cached scoring."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from .config import Config
from .fast import FastStep
from .model import TinyLlama
from .tasks import TaskData, make_task


@dataclass(frozen=True)
class Budget:
    steps: int = 1200
    batch_size: int = 64
    lr: float = 1e-3
    clip: float = 1.0
    n_train: int = 4000
    n_val: int = 200
    n_test: int = 200
    checkpoints: tuple[int, ...] = (300, 600, 900, 1200)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "n_train", "n_test"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"Budget.{name} must be a positive integer, got {v!r}")
        if not self.checkpoints or any(not 0 < c <= self.steps for c in self.checkpoints):
            raise ValueError(f"Budget.checkpoints must lie in 1..steps={self.steps}, "
                             f"got {self.checkpoints}")
        if list(self.checkpoints) != sorted(set(self.checkpoints)):
            raise ValueError(f"Budget.checkpoints must be increasing, got {self.checkpoints}")

    @classmethod
    def short(cls, steps: int) -> Budget:
        """The same budget cut to `steps`, with checkpoints at the quarters that fit."""
        marks = sorted({max(1, round(steps * q / 4)) for q in (1, 2, 3, 4)})
        return cls(steps=steps, checkpoints=tuple(marks))


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
    model: TinyLlama
    curve: list[dict] = field(default_factory=list)  # one row per checkpoint
    losses: list[float] = field(default_factory=list)  # training loss at every step
    seconds: float = 0.0


def batch_order(n_train: int, batch_size: int, steps: int, seed: int) -> torch.Tensor:
    """(steps, batch) example indices: a fresh permutation per epoch from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    need = steps * batch_size
    perms = [torch.randperm(n_train, generator=g) for _ in range(-(-need // n_train))]
    return torch.cat(perms)[:need].view(steps, batch_size)


def answer_loss(model: TinyLlama, ids: torch.Tensor, answer_len: int) -> torch.Tensor:
    """Teacher-forced cross-entropy on the answer positions only."""
    logits = model(ids[:, :-1], last=answer_len)  # (B, answer_len, V): head only where graded
    targets = ids[:, -answer_len:]  # (B, answer_len)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def score(model: TinyLlama, task, data: TaskData) -> float:
    """Accuracy by free-running greedy generation, the whole set at once, with a KV cache."""
    was_training = model.training
    model.eval()
    generated = model.generate(data.prompt, data.answer_len, use_cache=True)
    model.train(was_training)
    correct = task.grade(data.prompt, generated, data.answer)
    return int(correct.sum()) / len(data)  # an exact fraction of the set, as a Python float


@torch.no_grad()
def eval_loss(model: TinyLlama, data: TaskData) -> float:
    return answer_loss(model, data.ids, data.answer_len).item()


def fit(cfg: Config, spec: TaskSpec, seed: int, budget: Budget = Budget(),
        progress=None, compile: bool | None = None) -> FitResult:
    """Train one model under the budget; score the same weights at every checkpoint.

    Same seed and thread count -> bit-identical curve and weights. `progress`, if given,
    is called as progress(step, loss) after every step (the CLI hangs a bar on it).

    The step itself (forward, backward, clip, AdamW) runs on the speed path of `fast.py`:
    the same computation in fewer, fused operations. `compile=None` follows the
    environment (LLAMANAT_COMPILE, default on: what the study uses); compiled and eager
    runs are each deterministic but round differently, so their numbers differ.
    """
    task = spec.make(seed)
    splits = task.splits(budget.n_train, budget.n_val, budget.n_test)
    extra = {n: spec.make(seed, n).splits(0, 0, budget.n_test).test for n in spec.extrapolate}
    for n, data in extra.items():
        if data.ids.shape[1] - 1 > cfg.max_seq_len and cfg.position == "learned":
            raise ValueError(f"extrapolation length {n} pairs does not fit max_seq_len")
    model = TinyLlama(cfg, seed=seed)
    model.train()
    order = batch_order(budget.n_train, budget.batch_size, budget.steps, seed)
    batches = splits.train.ids[order]  # (steps, batch, L): every batch gathered up front
    result = FitResult(model)
    checkpoints = set(budget.checkpoints)
    t0 = time.perf_counter()
    # AdamW(lr, default betas and weight decay) + clip at budget.clip, on one flat vector
    train_step = FastStep(model, splits.train.answer_len, budget.lr, budget.clip, compile)
    for step in range(1, budget.steps + 1):
        loss = train_step(batches[step - 1])
        result.losses.append(loss.item())
        if step in checkpoints:
            row = {"step": step, "train_loss": result.losses[-1],
                   "val_loss": eval_loss(model, splits.val) if len(splits.val) else None,
                   "test_acc": score(model, task, splits.test)}
            for n, data in extra.items():
                row[f"test_acc_{n}"] = score(model, spec.make(seed, n), data)
            result.curve.append(row)
        if progress is not None:
            progress(step, result.losses[-1])
    result.seconds = time.perf_counter() - t0
    train_step.release()  # every parameter gets its own storage back
    model.eval()
    return result


def budget_dict(budget: Budget) -> dict:
    d = asdict(budget)
    d["checkpoints"] = list(d["checkpoints"])
    return d
