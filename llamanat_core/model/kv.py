"""The key/value cache at run time: the object used in decoding and greedy decoding through
it. Its byte arithmetic and the published LLaMA configurations are in `published.py`."""
from __future__ import annotations

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


@torch.no_grad()
def greedy_decode(model, prompt: torch.Tensor, n_new: int, cache: KVCache) -> torch.Tensor:
    """Greedy generation through `cache`: prefill the prompt, then feed one token per step.

    The last token is produced but never fed, so `cache` ends holding
    prompt + n_new - 1 positions. -> the new tokens (B, n_new)
    """
    logits = model(prompt, cache=cache, last=1)
    out = []
    for i in range(n_new):
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out.append(nxt)
        if i + 1 < n_new:
            logits = model(nxt, cache=cache)
    return torch.cat(out, dim=1)
