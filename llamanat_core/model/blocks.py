"""The decoder block's parts: norm, attention, feed-forward, and the block itself.

Every linear layer is bias-free unless `Config.bias` (the control) asks for biases.
Names follow transformers' Llama (q_proj, gate_proj, input_layernorm, ...) so a
state dict maps one-to-one onto LlamaForCausalLM.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import Config
from .positional import apply_rotary


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gain: no centring, no bias; computed in at least float32."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(at_least_float32(dtype))  # half precision is too coarse for the mean square
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision inputs, the input's own type for float32 and float64."""
    return torch.promote_types(dtype, torch.float32)


def make_norm(cfg: Config) -> nn.Module:
    if cfg.norm_position == "none":
        return nn.Identity()
    if cfg.norm == "rms":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)  # the displaced mechanism: gain and bias


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, Hkv, T, D) -> (B, Hkv * n_rep, T, D): query head h reads KV head h // n_rep."""
    if n_rep == 1:
        return x
    b, h_kv, t, d = x.shape
    x = x[:, :, None, :, :].expand(b, h_kv, n_rep, t, d)  # (B, Hkv, n_rep, T, D)
    return x.reshape(b, h_kv * n_rep, t, d)  # (B, H, T, D)


def attention_probabilities(q: torch.Tensor, k: torch.Tensor,
                            mask: torch.Tensor | None) -> torch.Tensor:
    """softmax(q kᵀ / √D) with the mask applied, in at least float32 -> (B, H, Tq, Tk).

    q (B, H, Tq, D), k (B, H, Tk, D), mask (Tq, Tk) bool, True where allowed. Row i is
    query i's distribution over the keys: the attention weights.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores.to(at_least_float32(scores.dtype)), dim=-1).to(q.dtype)


def manual_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor | None) -> torch.Tensor:
    """The readable path: scores, explicit mask, softmax in at least float32, weighted sum of V.

    q (B, H, Tq, D), k and v (B, H, Tk, D), mask (Tq, Tk) bool, True where allowed.
    """
    return attention_probabilities(q, k, mask) @ v  # (B, H, Tq, D)


def elementwise_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          mask: torch.Tensor | None) -> torch.Tensor:
    """manual_attention with its two products written as broadcast multiply-and-sum.

    The same sums over D and over keys, for the compiled training step: at 13 positions
    and 16 dimensions a matrix kernel per (batch, head) tile costs more in calls than in
    arithmetic, while inductor fuses these loops with the mask and the softmax.
    """
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.to(at_least_float32(scores.dtype)), dim=-1).to(q.dtype)
    return (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)  # (B, H, Tq, D)


def causal_mask(t_q: int, t_k: int) -> torch.Tensor:
    """Query i (at absolute position t_k - t_q + i) sees keys 0..its own position."""
    offset = t_k - t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=offset)


class Attention(nn.Module):
    """Causal self-attention with grouped KV heads and rotary positions on Q and K.

    `n_heads` query heads share `n_kv_heads` key/value heads (`repeat_kv`); RoPE, when
    the model passes its tables, rotates queries and keys, never values. `Config.attention`
    picks how the weighted sum is computed: "sdpa" (torch's fused kernel), "manual" (the
    readable path) or "elementwise" (the compiled training step's); all compute the same
    function. With `return_weights=True` it also returns the attention probabilities,
    computed on the readable path, as transformers' eager attention does.
    """

    def __init__(self, cfg: Config, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=cfg.bias)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=cfg.bias)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=cfg.bias)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=cfg.bias)

    def forward(self, x, rope=None, cache=None, start: int = 0, last: int | None = None,
                return_weights: bool = False):
        """x (B, T, C) -> (B, T, C); with `last`, only the last queries: (B, last, C).

        Keys and values always cover every position; `last` only drops queries whose
        output nobody reads (the final layer of a loss on the answer positions).
        With `return_weights`, (output, weights (B, H, Tq, Tk)), both from the manual path.
        """
        cfg = self.cfg
        b, t, _ = x.shape
        t_q = query_count(t, last)
        q = self.q_proj(x[:, t - t_q:])  # queries only where an output is read
        q = q.view(b, t_q, cfg.n_heads, cfg.head_dim).transpose(1, 2)  # (B, H, Tq, D)
        k = self.k_proj(x).view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.v_proj(x).view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        if rope is not None:  # positions rotate Q and K only; V carries content, unrotated
            cos, sin = rope
            q = apply_rotary(q, cos[t - t_q:], sin[t - t_q:], cfg.rope_pairing)
            k = apply_rotary(k, cos, sin, cfg.rope_pairing)
        k, v = self.with_cache(k, v, cache, start, q.dtype)  # (B, Hkv, Tk, D)
        k, v = repeat_kv(k, cfg.n_rep), repeat_kv(v, cfg.n_rep)  # (B, H, Tk, D)
        out, weights = self.attend(q, k, v, return_weights)  # softmax(q kᵀ / √D) v: (B, H, Tq, D)
        out = out.transpose(1, 2).reshape(b, t_q, cfg.n_heads * cfg.head_dim)  # (B, Tq, H*D)
        return self.o_proj(out) if weights is None else (self.o_proj(out), weights)

    def with_cache(self, k, v, cache, start: int, dtype: torch.dtype):
        """Without a cache, k and v as they are. With one, this step's k and v are written
        at positions start.. and every filled position comes back, in the queries' dtype
        (a cache may be held in another): (B, Hkv, start + T, D)."""
        if cache is None:
            return k, v
        k, v = cache.update(self.layer, k, v, start)
        return k.to(dtype), v.to(dtype)

    def attend(self, q, k, v, return_weights: bool = False):
        """The causal weighted sum of values by `Config.attention`'s path, all computing
        the same function: -> (out (B, H, Tq, D), weights (B, H, Tq, Tk) or None).

        The weights exist only on the readable path, so asking for them takes it.
        """
        t_q, t_k = q.shape[2], k.shape[2]
        if return_weights:
            weights = attention_probabilities(q, k, causal_mask(t_q, t_k))  # (B, H, Tq, Tk)
            return weights @ v, weights  # manual_attention, keeping its weights
        if self.cfg.attention == "manual":
            return manual_attention(q, k, v, causal_mask(t_q, t_k)), None
        if self.cfg.attention == "elementwise":
            return elementwise_attention(q, k, v, causal_mask(t_q, t_k)), None
        if t_q == t_k:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True), None
        if t_q == 1:  # one new query sees every earlier key
            return F.scaled_dot_product_attention(q, k, v), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(t_q, t_k)), None


def query_count(t: int, last: int | None) -> int:
    """How many queries a layer computes over `t` positions: all, or the last `last`."""
    return t if last is None else min(last, t)


ACTIVATIONS = {"swiglu": F.silu, "geglu": F.gelu, "gelu": F.gelu, "silu": F.silu}


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)): the gate scales each hidden unit smoothly.
    (The GEGLU control, `mlp="geglu"`, is the same unit with GELU in place of SiLU.)"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.mlp]

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.gate_proj(x)) * self.up_proj(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.hidden(x))


class GeluMLP(nn.Module):
    """The displaced two-matrix MLP, widened to 1.5 x d_ff so parameters match SwiGLU.
    (The `silu_mlp` control is the same MLP with SiLU: the activation without the gate.)"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.up_proj = nn.Linear(cfg.d_model, cfg.gelu_ff, bias=cfg.bias)
        self.down_proj = nn.Linear(cfg.gelu_ff, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.mlp]

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.up_proj(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.hidden(x))


class DecoderLayer(nn.Module):
    """One decoder block: attention then feed-forward, each with its norm and residual add.

    Pre-norm (LLaMA): x + attn(norm(x)), then x + mlp(norm(x)). `norm_position="post"` is
    the 2017 placement, norm(x + sublayer(x)); "none" makes both norms identities.
    """

    def __init__(self, cfg: Config, layer: int):
        super().__init__()
        self.norm_position = cfg.norm_position
        self.input_layernorm = make_norm(cfg)
        self.self_attn = Attention(cfg, layer)
        self.post_attention_layernorm = make_norm(cfg)
        self.mlp = SwiGLU(cfg) if cfg.mlp in ("swiglu", "geglu") else GeluMLP(cfg)

    def forward(self, x, rope=None, cache=None, start: int = 0, last: int | None = None):
        """With `last`, only the last positions come out: everything after attention
        (residual add, norm, MLP) works position by position, so nothing else changes."""
        skip = x if last is None else x[:, -last:]  # the residual rows that come out
        if self.norm_position == "post":  # 2017: normalise after the residual add
            x = self.input_layernorm(skip + self.self_attn(x, rope, cache, start, last))
            return self.post_attention_layernorm(x + self.mlp(x))
        # pre-norm (and "none", where the norms are identities): the residual stays clean
        x = skip + self.self_attn(self.input_layernorm(x), rope, cache, start, last)
        return x + self.mlp(self.post_attention_layernorm(x))
