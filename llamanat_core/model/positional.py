"""Rotary position embedding (RoPE) in both pairings, and the Q/K row permutation.

half-split   pairs channel i with i + d/2 (transformers' convention, the reference)
interleaved  pairs channel 2i with 2i + 1 (Meta's original code)
"""
from __future__ import annotations

import math

import torch
from torch import nn


def inverse_frequencies(head_dim: int, theta: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """theta^(-2i/d) for i in 0..d/2-1: pair i turns by this many radians per position."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=dtype) / head_dim))


def slowest_period(head_dim: int, theta: float) -> float:
    """Positions for the slowest pair to turn once: 2*pi * theta^((d-2)/d)."""
    return 2 * math.pi * theta ** ((head_dim - 2) / head_dim)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 pairing: str = "half") -> torch.Tensor:
    """Rotate x (..., T, D) by per-position angles; cos/sin are (T, D) laid out for `pairing`."""
    rotated = rotate_half(x) if pairing == "half" else rotate_interleaved(x)
    return x * cos + rotated * sin


class RotaryEmbedding(nn.Module):
    """cos/sin tables for positions 0..n-1, grown on demand (no parameters)."""

    def __init__(self, head_dim: int, theta: float, pairing: str, max_positions: int):
        super().__init__()
        self.head_dim, self.theta, self.pairing = head_dim, theta, pairing
        self.register_buffer("inv_freq", inverse_frequencies(head_dim, theta), persistent=False)
        self._build(max_positions)

    def _apply(self, fn, recurse=True):
        """A float64 copy (`model.double()`, for illustrations that must not depend on the
        CPU) recomputes its tables in float64: converted float32 tables would carry this
        CPU's float32 cos and sin rounding. Every other conversion just converts."""
        super()._apply(fn, recurse)
        if self.inv_freq.dtype == torch.float64:
            self.register_buffer("inv_freq", inverse_frequencies(self.head_dim, self.theta, torch.float64),
                                 persistent=False)
            self._build(self.cos.shape[0])
        return self

    def _build(self, n: int) -> None:
        angles = torch.outer(torch.arange(n, dtype=self.inv_freq.dtype), self.inv_freq)  # (T, D/2)
        if self.pairing == "half":
            angles = torch.cat((angles, angles), dim=-1)  # (T, D): i and i + D/2 share an angle
        else:
            angles = angles.repeat_interleave(2, dim=-1)  # (T, D): 2i and 2i+1 share an angle
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        if start + length > self.cos.shape[0]:
            self._build(max(2 * self.cos.shape[0], start + length))
        return self.cos[start:start + length], self.sin[start:start + length]


def interleaved_to_half_permutation(head_dim: int) -> torch.Tensor:
    """Row order that turns an interleaved head into a half-split one.

    Half-split channel j < d/2 is interleaved channel 2j; channel d/2 + j is 2j + 1.
    """
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def permute_qk_rows(weight: torch.Tensor, n_heads: int, head_dim: int,
                    to: str = "half") -> torch.Tensor:
    """Permute the output rows of a Q or K projection between the two pairings.

    weight is (n_heads * head_dim, d_model); the same permutation applied to Q and K
    leaves every score q.k unchanged, so the logits do not move.
    """
    perm = interleaved_to_half_permutation(head_dim)
    if to == "interleaved":
        perm = torch.argsort(perm)
    elif to != "half":
        raise ValueError(f"to must be 'half' or 'interleaved', got {to!r}")
    w = weight.view(n_heads, head_dim, -1)  # (H, D, d_model)
    return w[:, perm, :].reshape_as(weight)


def permute_qk_state(state: dict[str, torch.Tensor], n_heads: int, n_kv_heads: int, head_dim: int,
                     to: str = "half") -> dict[str, torch.Tensor]:
    """A copy of a model's state dict with every Q and K projection permuted to `to`.

    Q projections hold `n_heads` heads, K projections `n_kv_heads`; every other tensor
    (V, O, the MLP, norms, embeddings) is passed through unchanged.
    """
    out = dict(state)
    for name, w in state.items():
        if name.endswith("q_proj.weight"):
            out[name] = permute_qk_rows(w, n_heads, head_dim, to=to)
        elif name.endswith("k_proj.weight"):
            out[name] = permute_qk_rows(w, n_kv_heads, head_dim, to=to)
    return out
