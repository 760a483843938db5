"""The speed path of `train.fit`: one flat parameter vector, a compiled loss, fused AdamW.

Nothing here changes what is computed: the same model, the same answer-position
cross-entropy (`train.answer_loss` itself), gradient clipping at 1.0 and AdamW (lr 1e-3,
torch's default betas and weight decay) on every parameter, as `train.PlainStep` does.
What changes is how many small operations it takes:

- **One flat vector.** Every distinct parameter (the tied embedding/head matrix once) is
  a view into one flat tensor, and so is its gradient. Clipping is then one norm and one
  scale, AdamW one fused kernel, zeroing one fill: instead of ~20 of each per step.
- **A compiled loss.** The readable model runs through `torch.func.functional_call` on a
  per-configuration template, and `torch.compile` (inductor, C++ on CPU) fuses the
  element-wise work (norms, RoPE, softmax, SwiGLU, the loss) of forward and backward
  around the matrix multiplies. The template uses the manual attention path: it is the
  same arithmetic as SDPA and inductor fuses it, whereas SDPA's CPU kernel is an opaque,
  slow call at 13 positions. Shapes are static (`dynamic=False`), so what a run computes
  never depends on which runs the process did before it.

Switch compilation off with `LLAMANAT_COMPILE=0` (or `fit(..., compile=False)`). The
results are deterministic either way (same seed and thread count -> bit-identical), but
the two settings round differently, so their numbers differ in the last bits and, after
1,200 steps, visibly: the study records which one produced its files.
"""
from __future__ import annotations

import os

import torch
from torch import nn
from torch.func import functional_call

from .config import REFERENCE, Config
from .model import TinyLlama
from .train import answer_loss


def compile_default() -> bool:
    """The study's setting: compiled unless LLAMANAT_COMPILE is 0/false/no/off."""
    return os.environ.get("LLAMANAT_COMPILE", "1").strip().lower() not in ("0", "false", "no", "off")


class FlatParameters:
    """A model's distinct parameters as views into one flat vector, with one flat gradient.

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
        self.flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for _, p in named]))
        self.flat.grad = torch.zeros_like(self.flat)  # backward adds into it in place
        for (_, p), view in zip(named, self.views(self.flat.detach())):
            p.data = view

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [chunk.view(shape) for chunk, shape in zip(flat.split(self.sizes), self.shapes)]

    def release(self) -> None:
        for p in self.model.parameters():
            p.data = p.data.clone()


def clip_flat_grad_(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_'s rule on one flat gradient: scale by
    min(1, max_norm / (||g|| + 1e-6)). Returns the norm before clipping."""
    norm = torch.linalg.vector_norm(grad)
    grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


def flat_answer_loss(template: nn.Module, names: tuple, sizes: tuple, shapes: tuple,
                     answer_len: int, flat: torch.Tensor, buffers: dict,
                     ids: torch.Tensor) -> torch.Tensor:
    """train.answer_loss, with the parameters taken from the flat vector."""
    params = {n: c.view(s) for n, c, s in zip(names, flat.split(sizes), shapes)}

    def model(x, last):
        return functional_call(template, (params, buffers), (x,), {"last": last})

    return answer_loss(model, ids, answer_len)


_TEMPLATES: dict[Config, TinyLlama] = {}
_COMPILED = None


def _template(cfg: Config) -> TinyLlama:
    """One weightless module per architecture, shared by every run of the process.

    rope_theta only fills the cos/sin buffers, and the step passes the real model's
    buffers in (never the template's), so runs that differ only in the base share a
    template and a compiled graph; a test trains a non-default base both ways.
    """
    key = cfg.replace(attention="manual", rope_theta=REFERENCE.rope_theta)
    if key not in _TEMPLATES:
        with torch.device("meta"):
            _TEMPLATES[key] = TinyLlama(key, seed=None)
    return _TEMPLATES[key]


def _compiled_loss():
    global _COMPILED
    if _COMPILED is None:
        import torch._dynamo
        cfg = torch._dynamo.config
        # one cache entry per (architecture, answer length): ~20 in the whole study
        for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, max(getattr(cfg, name), 512))
        _COMPILED = torch.compile(flat_answer_loss, dynamic=False)
    return _COMPILED


class FastStep:
    """forward + backward + clip + AdamW for one model: `loss = step(ids)`."""

    def __init__(self, model: TinyLlama, answer_len: int, lr: float, clip: float,
                 compile: bool | None = None):
        self.params = FlatParameters(model)
        self.buffers = dict(model.named_buffers())
        self.template = _template(model.cfg)
        self.answer_len, self.clip = answer_len, clip
        self.loss_fn = _compiled_loss() if (compile_default() if compile is None else compile) \
            else flat_answer_loss
        self.opt = torch.optim.AdamW([self.params.flat], lr=lr, fused=True)

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        p = self.params
        return self.loss_fn(self.template, p.names, p.sizes, p.shapes, self.answer_len,
                            p.flat, self.buffers, ids)

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        grad = self.params.flat.grad
        grad.zero_()
        loss = self.loss(ids)
        loss.backward()  # accumulates into the zeroed flat gradient
        clip_flat_grad_(grad, self.clip)
        self.opt.step()
        return loss.detach()

    def release(self) -> None:
        self.params.release()
