"""The speed path of every run: one flat parameter vector, the whole step in one compiled graph.

Nothing here changes what is computed: the same model, the same cross-entropy
(`model.answer_loss` itself: the answer positions of a puzzle, every position of text),
gradient clipping at the budget's norm and AdamW at the budget's learning rate (constant,
or scheduled step by step) with the hyper-parameters of `optim` (torch's default betas,
eps and weight decay) on the parameters `optim.decays` picks, as `loop.PlainStep` does.
What changes is how many small operations it takes:

- **One flat vector.** Every distinct parameter (the tied embedding/head matrix once) is
  a view into one flat tensor, and the optimizer's two moments are flat tensors beside
  it. Clipping is then one norm and one scale, AdamW a handful of element-wise loops:
  instead of ~20 of each per step.
- **One compiled step.** `train_step` is a pure function of those tensors: the readable
  model runs through `torch.func.functional_call` on a weightless per-architecture
  template, `torch.func.grad_and_value` gives loss and gradient, then clipping and the
  AdamW update follow. `torch.compile` (inductor, C++ on CPU, with its C++ wrapper)
  turns forward, backward and update into one graph: the element-wise work (norms,
  RoPE, softmax, SwiGLU, the loss, the optimizer) fused around the matrix multiplies,
  no autograd bookkeeping, one Python call per step. The template's attention is
  `elementwise`: the manual path's sums written as broadcast products, which inductor
  fuses with the softmax, where SDPA's CPU kernel (or one matrix call per 13 x 16 tile)
  costs more in calls than in arithmetic at 13 positions. Shapes are static
  (`dynamic=False`) and nothing run-specific is baked into the graph, so every run of
  an architecture reuses it, and what a run computes never depends on which runs the
  process did before it.

Switch compilation off with `LLAMANAT_COMPILE=0` (or `fit(..., compile=False)`). The
results are deterministic either way (same seed and thread count -> bit-identical), but
the two settings round differently, so their numbers differ in the last bits and, after
1,200 steps, visibly: the study records which one produced its files.
"""
from __future__ import annotations

import os
import types

import torch
from torch import nn
from torch.func import functional_call, grad_and_value

from ..model.config import REFERENCE, Config
from ..model.model import TinyLlama, answer_loss
from .optim import BETAS, EPS, WEIGHT_DECAY, decays


def compile_default() -> bool:
    """The study's setting: compiled unless LLAMANAT_COMPILE is 0/false/no/off."""
    return os.environ.get("LLAMANAT_COMPILE", "1").strip().lower() not in ("0", "false", "no", "off")


class FlatParameters:
    """A model's distinct parameters as views into one flat vector.

    While it lives, the model's own parameters *are* those views, so the model always
    reads the current weights (checkpoint scoring needs no copy). `release()` gives every
    parameter its own storage back (safetensors refuses tensors that share memory).
    """

    def __init__(self, model: nn.Module):
        named = list(model.named_parameters())  # the tied matrix appears once
        self.model = model
        self.names = tuple(n for n, _ in named)
        self.shapes = tuple(tuple(p.shape) for _, p in named)
        self.sizes = tuple(p.numel() for _, p in named)
        self.flat = torch.cat([p.detach().reshape(-1) for _, p in named])  # the step updates it
        for (_, p), view in zip(named, self.views(self.flat)):
            p.data = view

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [chunk.view(shape) for chunk, shape in zip(flat.split(self.sizes), self.shapes)]

    def decay_mask(self, decay: str) -> torch.Tensor:
        """1 where weight decay touches the flat vector, 0 where it does not (`optim.decays`)."""
        return torch.cat([torch.full((n,), float(decays(p, decay)))
                          for n, p in zip(self.sizes, self.model.parameters())])

    def release(self) -> None:
        for p in self.model.parameters():
            p.data = p.data.clone()


def flat_answer_loss(template: nn.Module, names: tuple, sizes: tuple, shapes: tuple,
                     answer_len: int | None, flat: torch.Tensor, buffers: dict,
                     ids: torch.Tensor) -> torch.Tensor:
    """model.answer_loss, with the parameters taken from the flat vector."""
    params = {n: c.view(s) for n, c, s in zip(names, flat.split(sizes), shapes)}

    def model(x, last):
        return functional_call(template, (params, buffers), (x,), {"last": last})

    return answer_loss(model, ids, answer_len)


def adamw_(flat: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
           exp_avg_sq: torch.Tensor, count: torch.Tensor, lr, decay=None) -> None:
    """torch.optim.AdamW's update with the hyper-parameters of `optim` (the plain loop's),
    in place on flat tensors. `count` is the step number as a 0-d float32 tensor, so one
    compiled graph serves every step; so is `lr` when it follows a schedule. `decay`, a
    0/1 mask, limits weight decay to where it is 1 (None: everywhere)."""
    (beta1, beta2), eps, weight_decay = BETAS, EPS, WEIGHT_DECAY
    count.add_(1)
    if decay is None:
        flat.mul_(1 - lr * weight_decay)  # decoupled weight decay
    else:
        flat.mul_(1 - lr * weight_decay * decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias1 = 1 - torch.pow(beta1, count)
    bias2 = 1 - torch.pow(beta2, count)
    denom = exp_avg_sq.sqrt() / bias2.sqrt() + eps
    flat.sub_(lr * exp_avg / (bias1 * denom))


def train_step(template: nn.Module, names: tuple, sizes: tuple, shapes: tuple,
               answer_len: int | None, flat: torch.Tensor, exp_avg: torch.Tensor,
               exp_avg_sq: torch.Tensor, count: torch.Tensor, buffers: dict,
               ids: torch.Tensor, lr, clip: float, decay=None) -> torch.Tensor:
    """One whole training step as a pure function of its tensors: forward and backward
    (torch.func), clipping, AdamW. Compiled, it is one graph; every run of an
    architecture reuses it, since nothing run-specific is baked in."""
    grad, loss = grad_and_value(flat_answer_loss, argnums=5)(
        template, names, sizes, shapes, answer_len, flat, buffers, ids)
    norm = torch.linalg.vector_norm(grad)
    grad = grad * torch.clamp(clip / (norm + 1e-6), max=1.0)
    adamw_(flat, grad, exp_avg, exp_avg_sq, count, lr, decay)
    return loss


_TEMPLATES: dict[Config, TinyLlama] = {}
_GRAPHS: dict[tuple, object] = {}  # graph key -> its own compiled copy of train_step


def template_attention(answer_len: int | None) -> str:
    """The attention path the compiled step traces. A puzzle's 13 positions: `elementwise`,
    whose broadcast products inductor fuses with the softmax. Text, 48 positions and a
    loss at each: `manual`, two batched matrix multiplies; there the broadcast product
    holds head_dim times more numbers than the scores and costs more than the multiply
    (measured by benchmarks/train_step.py, which prints both)."""
    return "manual" if answer_len is None else "elementwise"


def _template(cfg: Config, attention: str = "elementwise") -> TinyLlama:
    """One weightless module per architecture, shared by every run of the process.

    rope_theta only fills the cos/sin buffers, and the step passes the real model's
    buffers in (never the template's), so runs that differ only in the base share a
    template and a compiled graph; a test trains a non-default base both ways.
    """
    key = cfg.replace(attention=attention, rope_theta=REFERENCE.rope_theta)
    if key not in _TEMPLATES:
        with torch.device("meta"):
            _TEMPLATES[key] = TinyLlama(key, seed=None)
    return _TEMPLATES[key]


# dynamo's guards on the process's state: grad mode, deterministic algorithms, the default
# device, torch-function and functorch state, autograd hooks; one check each per call
STATE_GUARDS = ("GLOBAL_STATE", "GRAD_MODE", "DETERMINISTIC_ALGORITHMS", "TORCH_FUNCTION_STATE",
                "DEFAULT_DEVICE", "FUNCTORCH_STACK_MATCH", "AUTOGRAD_SAVED_TENSORS_HOOKS",
                "SHAPE_ENV")


# dynamo's other guards on the step, dropped: the template's modules, hooks and attribute
# dicts, the parameter names and sizes, lr, clip and the answer length (all fixed by the
# graph key), and whether inputs alias (FastStep's tensors never do). tests/test_pinned_
# internals.py fails, naming the type, when torch guards the step with a type not listed.
KEY_GUARDS = ("BUILTIN_MATCH", "CLASS_MATCH", "CLOSURE_MATCH", "CONSTANT_MATCH", "DICT_CONTAINS",
              "DICT_KEYS_MATCH", "DICT_NOT_CONTAINS", "DUPLICATE_INPUT", "EMPTY_NN_MODULE_HOOKS_DICT",
              "EQUALS_MATCH", "ID_MATCH", "MODULE_MATCH", "NOT_PRESENT_IN_GENERIC_DICT",
              "SEQUENCE_LENGTH", "TYPE_MATCH")


def tensor_and_state_guards(entries) -> list[bool]:
    """Keep the guards on the step's input tensors (dtype, shape, strides; not the
    template's weightless parameters) and on the process's state; drop the rest."""
    return [e.guard_type in STATE_GUARDS
            or (e.guard_type == "TENSOR_MATCH" and not isinstance(e.value, nn.Parameter))
            for e in entries]


def train_step_copy():
    """`train_step` on a new code object: the same function with a compiled-graph cache of
    its own (dynamo keeps a function's graphs on its code object)."""
    return types.FunctionType(train_step.__code__.replace(), train_step.__globals__,
                              train_step.__name__)


def _compiled_step(key: tuple):
    """The compiled step of one graph key: (template, answer length, lr or "scheduled", clip,
    decay).

    Before every call of a compiled function dynamo checks the guards that pick its graph:
    here ~700 of them (the template's modules, the parameter names and sizes, lr, clip),
    about 0.2 ms of a 6-8 ms step. All but the tensor guards are fixed by the key, so each
    key compiles its own copy of `train_step` (dynamo keeps a function's graphs on its
    code object) that checks only its tensors and the process's state. A shared code object
    under those guards would hand one architecture's graph to another with the same
    parameter shapes (llama and postnorm); a test shows that, and that the copies do not.
    The copies trace the same code to the same graph: the kernels, and so every number,
    are those of one shared compiled function.
    """
    if key not in _GRAPHS:
        # the C++ wrapper calls the graph's kernels without a Python frame per kernel
        _GRAPHS[key] = torch.compile(train_step_copy(), dynamic=False, options={
            "cpp_wrapper": True, "guard_filter_fn": tensor_and_state_guards})
    return _GRAPHS[key]


class FastStep:
    """forward + backward + clip + AdamW for one model: `loss = step(ids)`.

    The arguments are `loop.PlainStep`'s: `lr` a constant (baked into the graph) or a
    schedule, step -> rate (fed to the graph each step as a tensor); `answer_len` None
    trains on every position; `decay` picks what weight decay touches. AdamW's other
    hyper-parameters are `optim`'s. `compile` None follows LLAMANAT_COMPILE.
    """

    def __init__(self, model: TinyLlama, answer_len: int | None, lr, clip: float,
                 compile: bool | None = None, decay: str = "all"):
        self.params = FlatParameters(model)
        self.buffers = dict(model.named_buffers())
        self.template = _template(model.cfg, template_attention(answer_len))
        self.answer_len, self.clip, self.step = answer_len, clip, 0
        self.schedule = lr if callable(lr) else None
        self.lr = torch.zeros((), dtype=torch.float32) if callable(lr) else lr
        # "all" keeps the puzzles' graph exactly as it was: no mask in it
        self.decay = None if decay == "all" else self.params.decay_mask(decay)
        compiled = compile_default() if compile is None else compile
        key = (self.template, answer_len, "scheduled" if callable(lr) else lr, clip, decay)
        self.step_fn = _compiled_step(key) if compiled else train_step
        flat = self.params.flat
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)
        self.count = torch.zeros((), dtype=torch.float32)  # float64 would not advance in the graph

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        self.step += 1
        if self.schedule is not None:
            self.lr.fill_(self.schedule(self.step))
        p = self.params
        return self.step_fn(self.template, p.names, p.sizes, p.shapes, self.answer_len, p.flat,
                            self.exp_avg, self.exp_avg_sq, self.count, self.buffers, ids,
                            self.lr, self.clip, self.decay)

    def release(self) -> None:
        self.params.release()
