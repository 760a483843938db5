"""The published LLaMA configurations and their arithmetic: exact parameter counts, the
feed-forward width rule, and the bytes a KV cache of any configuration holds. Pure
arithmetic on plain numbers: nothing here builds a model (the cache itself is `kv.py`)."""
from __future__ import annotations

import math
from dataclasses import dataclass


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int,
                   batch: int = 1, bytes_per_value: int = 2) -> int:
    """2 (K and V) x layers x batch x KV heads x positions x head_dim x bytes."""
    return 2 * n_layers * batch * n_kv_heads * seq_len * head_dim * bytes_per_value


def llama_ffn_rule(dim: int, multiple_of: int = 256, ffn_dim_multiplier: float | None = None) -> int:
    """The feed-forward width rule of Meta's LLaMA code: 2/3 of 4d, optionally scaled, rounded
    up to a multiple of `multiple_of`.

    LLaMA-1 uses the defaults (256 * ceil(8d/3/256): 11,008 at d = 4,096). Llama-2-70B
    passes ffn_dim_multiplier=1.3 and multiple_of=4096, which gives its 28,672; the
    defaults at d = 8,192 would give 22,016. A model's real width is the
    `intermediate_size` of its config, not this rule.
    """
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * math.ceil(hidden / multiple_of)


@dataclass(frozen=True)
class PublishedModel:
    """A published LLaMA configuration: what the cache and parameter arithmetic needs."""
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    context: int
    paper_params: float | None = None  # billions, as the paper states them
    # The config's feed-forward width (transformers' `intermediate_size`). None only for
    # a hypothetical model, which then gets LLaMA-1's rule; every entry of PUBLISHED sets it.
    intermediate_size: int | None = None

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        """The feed-forward width: `intermediate_size`, or LLaMA-1's rule when it is not given."""
        return self.intermediate_size if self.intermediate_size is not None else llama_ffn_rule(self.dim)


LLAMA_VOCAB = 32_000

# LLaMA-1 (arXiv 2302.13971, Table 2) and Llama-2-70B (GQA, 8 KV heads); the feed-forward
# widths are the `intermediate_size` of each model's released config.
PUBLISHED = (
    PublishedModel("LLaMA-1 7B", 4096, 32, 32, 32, 2048, 6.7, intermediate_size=11_008),
    PublishedModel("LLaMA-1 13B", 5120, 40, 40, 40, 2048, 13.0, intermediate_size=13_824),
    PublishedModel("LLaMA-1 33B", 6656, 60, 52, 52, 2048, 32.5, intermediate_size=17_920),
    PublishedModel("LLaMA-1 65B", 8192, 80, 64, 64, 2048, 65.2, intermediate_size=22_016),
    PublishedModel("Llama-2-70B", 8192, 80, 64, 8, 4096, None, intermediate_size=28_672),
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
