"""The key/value cache: the object used in decoding, and its exact byte arithmetic (SPEC §7)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


class KVCache:
    """Pre-allocated K and V per layer, (B, n_kv_heads, capacity, head_dim) each.

    `length` positions are filled; attention reads only those. The model writes into
    it during `forward(ids, cache=...)`, so a decode step costs one new position.
    """

    def __init__(self, n_layers: int, batch: int, n_kv_heads: int, head_dim: int,
                 capacity: int, dtype: torch.dtype = torch.float32):
        shape = (batch, n_kv_heads, capacity, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.capacity = capacity
        self.length = 0

    @classmethod
    def for_model(cls, cfg, batch: int, capacity: int, dtype=torch.float32) -> KVCache:
        return cls(cfg.n_layers, batch, cfg.n_kv_heads, cfg.head_dim, capacity, dtype)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: int):
        """Write k, v (B, Hkv, T, D) at positions start..start+T-1; return the filled prefix."""
        end = start + k.shape[2]
        if end > self.capacity:
            raise ValueError(f"KV cache capacity {self.capacity} exceeded (need {end} positions)")
        self.k[layer][:, :, start:end] = k
        self.v[layer][:, :, start:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def nbytes(self, filled_only: bool = True) -> int:
        """Bytes of K and V actually held (the filled prefix, or the whole allocation)."""
        total = sum(t.nbytes for t in self.k + self.v)
        return total * self.length // self.capacity if filled_only else total


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int,
                   batch: int = 1, bytes_per_value: int = 2) -> int:
    """2 (K and V) x layers x batch x KV heads x positions x head_dim x bytes."""
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim * bytes_per_value


@dataclass(frozen=True)
class PublishedModel:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    context: int
    paper_params: float | None = None  # billions, as the paper states them

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        """LLaMA's rule: 2/3 * 4d rounded up to a multiple of 256."""
        return 256 * math.ceil(8 * self.dim / 3 / 256)


LLAMA_VOCAB = 32_000

# LLaMA-1 (arXiv 2302.13971, Table 2) and Llama-2-70B (GQA, 8 KV heads).
PUBLISHED = (
    PublishedModel("LLaMA-1 7B", 4096, 32, 32, 32, 2048, 6.7),
    PublishedModel("LLaMA-1 13B", 5120, 40, 40, 40, 2048, 13.0),
    PublishedModel("LLaMA-1 33B", 6656, 60, 52, 52, 2048, 32.5),
    PublishedModel("LLaMA-1 65B", 8192, 80, 64, 64, 2048, 65.2),
    PublishedModel("Llama-2-70B", 8192, 80, 64, 8, 4096, None),
)


def llama_parameters(m: PublishedModel, vocab: int = LLAMA_VOCAB, biases: bool = False) -> int:
    """Exact parameter count of a LLaMA config (untied embeddings and head).

    With biases=True, what a bias on every linear layer (and a LayerNorm-style
    norm bias) would add on top.
    """
    d, h = m.dim, m.ffn_hidden
    kv = m.n_kv_heads * m.head_dim
    attn = d * d + 2 * d * kv + d * d
    mlp = 3 * d * h
    norms = 2 * d
    total = vocab * d * 2 + m.n_layers * (attn + mlp + norms) + d
    if biases:
        total += m.n_layers * (d + 2 * kv + d + 2 * h + d + 2 * d) + d + vocab
    return total
