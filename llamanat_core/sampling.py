"""Generating text from a trained model through the KV cache: greedy or with a temperature.

A model trained on windows of `context` characters has only ever seen positions below
`context`. To write more than that, `sample_text` keeps the model inside what it knows:
when the cache is full it starts a new one from the last half window of text (one
prefill), so every prediction reads between half a window and a whole window of
context, at positions it was trained on. Between refills each character costs one cached
forward step.
"""
from __future__ import annotations

import torch

from .kv import KVCache


@torch.no_grad()
def sample_text(model, prompt: torch.Tensor, n_new: int, temperature: float = 0.0,
                seed: int = 0, window: int | None = None) -> torch.Tensor:
    """`n_new` token ids (n_new,) following `prompt` (T,). Temperature 0 is greedy (the
    argmax); above 0 each character is drawn from softmax(logits / temperature) with a
    generator seeded by `seed`. `window` (default the model's `max_seq_len`) is the
    longest context the model reads."""
    window = window or model.cfg.max_seq_len
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature!r}")
    if not 0 < len(prompt) <= window:
        raise ValueError(f"the prompt must hold 1..{window} tokens, got {len(prompt)}")
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    dtype = model.embed_tokens.weight.dtype
    text = prompt.tolist()
    cache = KVCache.for_model(model.cfg, 1, window, dtype)
    logits = model(prompt[None], cache=cache, last=1)  # (1, 1, V)
    for _ in range(n_new):
        if temperature == 0:
            nxt = int(logits[0, -1].argmax())
        else:
            probs = torch.softmax(logits[0, -1] / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=g))
        text.append(nxt)
        if cache.length == window:  # full: start again from the last half window
            cache = KVCache.for_model(model.cfg, 1, window, dtype)
            logits = model(torch.tensor([text[-(window // 2):]]), cache=cache, last=1)
        else:
            logits = model(torch.tensor([[nxt]]), cache=cache)  # (1, 1, V)
    model.train(was_training)
    return torch.tensor(text[len(prompt):])
