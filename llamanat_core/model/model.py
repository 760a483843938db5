"""TinyLlama: the decoder-only reference model and its controls."""
from __future__ import annotations

import math
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import DecoderLayer, make_norm
from .config import Config
from .kv import KVCache, greedy_decode
from .positional import RotaryEmbedding


class TinyLlama(nn.Module):
    """The decoder-only model: token embedding, `n_layers` decoder blocks, final norm, head.

    Positions enter as RoPE inside attention (the reference) or as a learned table added
    at the input (`position="learned"`, the control). The head shares the embedding
    matrix when `tie_embeddings`. `seed` initialises the weights from a private generator
    (None leaves them unset, for loading a state dict). Parameter names are transformers'
    Llama names, so a state dict maps one-to-one onto LlamaForCausalLM (see `hf.py`).
    """

    def __init__(self, cfg: Config, seed: int | None = 0):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.position == "learned":  # the control: a table added at the input
            self.embed_positions = nn.Embedding(cfg.max_seq_len, cfg.d_model)
            self.rotary = None
        else:
            self.embed_positions = None
            self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope_theta, cfg.rope_pairing,
                                          cfg.max_seq_len)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_layers))
        self.norm = make_norm(cfg) if cfg.norm_position != "none" else nn.Identity()
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight  # one matrix, counted once
        if seed is not None:
            self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int) -> None:
        """normal(0, 0.02) everywhere; the two residual writers get 0.02 / sqrt(2 n_layers);
        norm gains start at 1 and biases (only the `bias` control has them) at 0.

        Drawn from a private generator in parameter order, so the global RNG never matters.
        """
        g = torch.Generator().manual_seed(seed)
        std = self.cfg.init_std
        residual_std = std / math.sqrt(2 * self.cfg.n_layers)
        for name, p in self.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.normal_(0.0, residual_std, generator=g)
            elif name.endswith("layernorm.weight") or name == "norm.weight":
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                p.normal_(0.0, std, generator=g)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None,
                last: int | None = None) -> torch.Tensor:
        """ids (B, T) -> logits (B, T, V), or (B, last, V) for only the last positions.

        With a cache, ids are the next positions after what the cache holds.
        """
        b, t = ids.shape
        start = cache.length if cache is not None else 0
        if start + t > self.cfg.max_seq_len and self.embed_positions is not None:
            raise ValueError(f"sequence of {start + t} positions exceeds the learned table "
                             f"(Config.max_seq_len={self.cfg.max_seq_len})")
        x = self.embed_tokens(ids)  # (B, T, C)
        rope = None
        if self.embed_positions is not None:
            x = x + self.embed_positions.weight[start:start + t]  # (B, T, C)
        else:
            rope = self.rotary(start, t)
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            # Where only the last positions are read (a loss on the answer, the next token),
            # the final layer computes queries, MLP and head for those rows alone: every
            # other row would be thrown away. Keys and values still cover the whole input.
            x = layer(x, rope, cache, start, last if i == n - 1 else None)  # (B, T or last, C)
        if cache is not None:
            cache.length = start + t
        return self.lm_head(self.norm(x))  # (B, T, V) or (B, last, V)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, use_cache: bool = True,
                 cache_dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Greedy free-running generation for a batch of equal-length prompts -> (B, n_new)."""
        b, t = prompt.shape
        if use_cache:  # prefill once, then one new position per token
            return greedy_decode(self, prompt, n_new, KVCache.for_model(self.cfg, b, t + n_new, cache_dtype))
        out, ids = [], prompt
        for _ in range(n_new):  # every token recomputes the whole sequence
            nxt = self(ids, last=1)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            out.append(nxt)
            ids = torch.cat((ids, nxt), dim=1)
        return torch.cat(out, dim=1)

    def num_parameters(self) -> int:
        """Distinct parameters: the tied embedding/head matrix counts once."""
        return sum(p.numel() for p in self.parameters())

    def parameter_breakdown(self) -> OrderedDict[str, int]:
        """Parameters per group (embedding, positions, attention, mlp, norms, head)."""
        groups: OrderedDict[str, int] = OrderedDict(
            (k, 0) for k in ("embedding", "positions", "attention", "mlp", "norms", "head"))
        for name, p in self.named_parameters():
            if name.startswith("embed_tokens"):
                groups["embedding"] += p.numel()
            elif name.startswith("embed_positions"):
                groups["positions"] += p.numel()
            elif ".self_attn." in name:
                groups["attention"] += p.numel()
            elif ".mlp." in name:
                groups["mlp"] += p.numel()
            elif name.startswith("lm_head"):
                groups["head"] += p.numel()
            else:
                groups["norms"] += p.numel()
        return groups


def answer_loss(model, ids: torch.Tensor, answer_len: int | None) -> torch.Tensor:
    """Teacher-forced cross-entropy on the answer positions only: the training objective.
    On text every next character is an answer: `answer_len` None scores every position.

    `model` is anything called as model(ids, last=k): a TinyLlama itself, or the
    speed path's functional call of one.
    """
    logits = model(ids[:, :-1], last=answer_len)  # (B, answer_len or T, V): head only where graded
    targets = ids[:, 1:] if answer_len is None else ids[:, -answer_len:]  # (B, answer_len or T)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
