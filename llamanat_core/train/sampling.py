"""Generating text from a trained model through the KV cache: greedy or with a temperature.

A model trained on windows of `context` characters has only ever seen positions below
`context`. To write more than that, `sample_text` keeps the model inside what it knows:
when the cache is full it starts a new one from the last half window of text (one
prefill), so every prediction reads between half a window and a whole window of
context, at positions it was trained on. Between refills each character costs one cached
forward step; `use_cache=False` recomputes that same window for every character instead
(the same text, the cost the cache saves: the KV-cache chapter times both).
"""
from __future__ import annotations

import torch

from ..model.kv import KVCache


@torch.no_grad()
def sample_text(model, prompt: torch.Tensor, n_new: int, temperature: float = 0.0,
                seed: int = 0, window: int | None = None, use_cache: bool = True) -> torch.Tensor:
    """`n_new` token ids (n_new,) following `prompt` (T,). Temperature 0 is greedy (the
    argmax); above 0 each character is drawn from softmax(logits / temperature) with a
    generator seeded by `seed`. `window` (default the model's `max_seq_len`) is the
    longest context the model reads. `use_cache=False` reads the same windows, each
    recomputed in full."""
    window = window or model.cfg.max_seq_len
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}")
    if not 0 < len(prompt) <= window:
        raise ValueError(f"the prompt must hold 1..{window} tokens, got {len(prompt)}")
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    dtype = model.embed_tokens.weight.dtype
    text, start = prompt.tolist(), 0  # the window the next prediction reads: text[start:]
    cache = KVCache.for_model(model.cfg, 1, window, dtype) if use_cache else None
    logits = model(prompt[None], cache=cache, last=1)  # (1, 1, V)
    for _ in range(n_new):
        if temperature == 0:
            nxt = int(logits[0, -1].argmax())
        else:
            probs = torch.softmax(logits[0, -1] / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=g))
        text.append(nxt)
        full = len(text) - 1 - start == window  # (the cache's length, with a cache)
        start = len(text) - window // 2 if full else start  # full: the last half window
        if use_cache and full:
            cache = KVCache.for_model(model.cfg, 1, window, dtype)
            logits = model(torch.tensor([text[start:]]), cache=cache, last=1)
        elif use_cache:
            logits = model(torch.tensor([[nxt]]), cache=cache)  # (1, 1, V)
        else:
            logits = model(torch.tensor([text[start:]]), last=1)  # the whole window again
    model.train(was_training)
    return torch.tensor(text[len(prompt):])
