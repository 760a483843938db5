"""The KV cache, measured: exact arithmetic, identical tokens, real bytes, timings.

The arithmetic is `published.kv_cache_bytes`. The measured side runs the package's own
`KVCache` and `TinyLlama.generate`. Timings depend on the machine, so they are measured
once (`llamanat study --only kv_cache`, which writes them with
`study.kv_timing.write_timing`) into committed JSON files that record the machine, and
the chapter reads them (or re-measures with fresh=True): one step at growing lengths with
random weights (`measure_timing`), and whole generations of text by the trained text model
(`measure_text_timing`). This module only measures
and reads: it writes nothing.
"""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from ...data.text import encode
from ...model.config import MATRIX_VARIANTS, variant_config
from ...model.kv import KVCache, greedy_decode
from ...model.model import TinyLlama
from ...model.published import PUBLISHED, kv_cache_bytes
from ...paths import WEIGHTS_DIR
from ...study import environment, trained_weights
from ...study.kv_timing import load_text_timing, load_timing  # noqa: F401  (the chapter reads them here)
from ...train.sampling import sample_text
from ...util import torch_threads
from .text import reference_text_model

LENGTHS = (16, 32, 64, 128, 256, 512, 1024, 2048)
REPEATS = 41
TINY = {"mha": "tiny MHA", "llama": "tiny GQA (reference)", "mqa": "tiny MQA"}


# ---------------------------------------------------------------- arithmetic

def arithmetic_table(positions: int = 2048, batch: int = 1, bytes_per_value: int = 2) -> pd.DataFrame:
    """K and V bytes: the tiny model's MHA/GQA/MQA at `positions`, then the published
    models at their own context lengths (the table `llamanat cache` prints)."""
    rows = []
    for name, label in TINY.items():
        cfg = variant_config(name)
        rows.append((label, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, positions))
    rows += [(m.name, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.context) for m in PUBLISHED]
    out = pd.DataFrame(rows, columns=["model", "layers", "query heads", "KV heads", "head_dim",
                                      "positions"]).set_index("model")
    out["bytes per position"] = [kv_cache_bytes(r.layers, r["KV heads"], r.head_dim, 1, batch,
                                                bytes_per_value) for _, r in out.iterrows()]
    out["bytes"] = [kv_cache_bytes(r.layers, r["KV heads"], r.head_dim, r.positions, batch,
                                   bytes_per_value) for _, r in out.iterrows()]
    return out


def human_bytes(n: int) -> str:
    """Binary units, two decimals at most: 524288 -> '512 KiB', 2**30 -> '1 GiB',
    1342177280 -> '1.25 GiB' (the exact byte count sits next to it in every table)."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:,.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} B"


# ---------------------------------------------------------------- weights

def load_reference(task: str, weights_dir: Path = WEIGHTS_DIR) -> TinyLlama | None:
    """The trained seed-0 reference model of `task` from the committed weights, or None."""
    return trained_weights(task, "llama", 0, weights_dir=weights_dir)[0]


# ---------------------------------------------------------------- measured: tokens and bytes

def generate_with_cache(model: TinyLlama, prompt: torch.Tensor, n_new: int,
                        dtype: torch.dtype = torch.float32, capacity: int | None = None):
    """`TinyLlama.generate(use_cache=True)` into a cache we keep: `kv.greedy_decode` through a
    cache of `capacity` positions (prompt + n_new by default), in `dtype`.

    The cache ends holding prompt + n_new - 1 positions. -> (tokens (B, n_new), cache)
    """
    b, t = prompt.shape
    cache = KVCache.for_model(model.cfg, b, capacity or t + n_new, dtype)
    return greedy_decode(model, prompt, n_new, cache), cache


def cached_vs_recomputed(model: TinyLlama, prompts: torch.Tensor, n_new: int) -> dict:
    """Greedy generation with the cache and by full recomputation: are the tokens identical?"""
    model.eval()
    cached = model.generate(prompts, n_new, use_cache=True)
    recomputed = model.generate(prompts, n_new, use_cache=False)
    return {"items": int(prompts.shape[0]), "new tokens": n_new, "tokens compared": int(cached.numel()),
            "identical": bool(torch.equal(cached, recomputed)),
            "tokens that differ": int((cached != recomputed).sum()),
            "distinct generations": len({tuple(r) for r in cached.tolist()}),
            "tokens": cached}


def cache_agreement(prompts: torch.Tensor, n_new: int, stds: dict[str, float],
                    addition_prompts: torch.Tensor, variants=None, weights_dir: Path = WEIGHTS_DIR,
                    addition_new: int = 6) -> pd.DataFrame:
    """`cached_vs_recomputed` for many models, one row each, indexed by (variant, weights).

    Every variant (the matrix by default) with seed-0 weights drawn at each std of `stds`
    (row label -> std), on `prompts` for `n_new` tokens; then the committed seed-0
    references that exist: recall's on the same prompts, addition's on `addition_prompts`
    for `addition_new` tokens (the graded chain). A missing reference has no row."""
    rows = {}
    for label, std in stds.items():
        for v in MATRIX_VARIANTS if variants is None else variants:
            model = TinyLlama(variant_config(v, init_std=std), seed=0).eval()
            rows[(v, label)] = cached_vs_recomputed(model, prompts, n_new)
    for task, ids, new in (("recall", prompts, n_new), ("addition", addition_prompts, addition_new)):
        model = load_reference(task, weights_dir)
        if model is not None:
            rows[("llama", f"trained on {task}, seed 0")] = cached_vs_recomputed(model, ids, new)
    table = pd.DataFrame({k: {c: x for c, x in r.items() if c != "tokens"} for k, r in rows.items()}).T
    table = table.infer_objects()
    table.index.names = ["variant", "weights"]
    return table


def held_bytes(cache: KVCache) -> int:
    """Bytes of the filled prefix, counted from the tensors themselves (not the formula)."""
    return sum(t[:, :, :cache.length].numel() * t.element_size() for t in cache.k + cache.v)


def unwritten_is_zero(cache: KVCache) -> bool:
    """Positions past the filled prefix were allocated but never written (still all zero)."""
    return all(not t[:, :, cache.length:].any() for t in cache.k + cache.v)



def cache_bytes(model: TinyLlama, prompt: torch.Tensor, n_new: int, positions: int) -> dict:
    """One greedy generation into an fp16 cache of `positions` positions, its bytes counted
    three ways: the allocation (`allocated`), the filled prefix from the tensors themselves
    (`held`, and `counted` by `KVCache.nbytes`) and the formula at both lengths; whether the
    positions past the prefix are still zero, whether `TinyLlama.generate` gives the same
    tokens, and how many tokens equal a float32 generation without any cache (`kept`)."""
    cfg = model.cfg
    tokens, cache = generate_with_cache(model, prompt, n_new, torch.float16, capacity=positions)
    recomputed = model.generate(prompt, n_new, use_cache=False)  # float32, no cache
    return {"tensors": len(cache.k) + len(cache.v), "shape": tuple(cache.k[0].shape),
            "dtype": str(cache.k[0].dtype).removeprefix("torch."), "filled": cache.length,
            "allocated": cache.nbytes(filled_only=False), "held": held_bytes(cache),
            "counted": cache.nbytes(),
            "formula, full": kv_cache_bytes(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, positions),
            "formula, filled": kv_cache_bytes(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, cache.length),
            "unwritten zero": unwritten_is_zero(cache),
            "same as generate": torch.equal(tokens, model.generate(prompt, n_new, use_cache=True,
                                                                   cache_dtype=torch.float16)),
            "kept": int((tokens == recomputed).sum()), "new tokens": n_new, "KV heads": cfg.n_kv_heads}


def cache_bytes_table(measured: dict[str, dict], positions: int) -> pd.DataFrame:
    """`cache_bytes` of several models as one table, a column per model (name -> its dict),
    headed by the name and the model's KV heads."""
    return pd.DataFrame({f"{name} ({m['KV heads']} KV head{'s' if m['KV heads'] > 1 else ''})": {
        "tensors": f"{m['tensors']} × {m['shape']}", "dtype": m["dtype"],
        f"allocated bytes ({positions:,} positions)": f"{m['allocated']:,}",
        f"formula at {positions:,} positions": f"{m['formula, full']:,}",
        "filled positions after generation": m["filled"],
        "filled bytes, counted from the tensors": f"{m['held']:,}",
        "formula at the filled length": f"{m['formula, filled']:,}",
        "positions past the prefix all zero": m["unwritten zero"],
        "tokens equal to fp32 recomputation": f"{m['kept']} of {m['new tokens']}",
    } for name, m in measured.items()})


# ---------------------------------------------------------------- measured: time per token

class _Step:
    """Producing the next token after `ids` (1, L), both ways: with the cache holding the
    first L - 1 positions (feed one token), and by recomputing all L positions."""

    def __init__(self, model: TinyLlama, ids: torch.Tensor):
        self.model, self.ids = model, ids
        self.cache = KVCache.for_model(model.cfg, 1, ids.shape[1])
        with torch.no_grad():
            model(ids[:, :-1], cache=self.cache)  # prefill, not timed
        self.filled = self.cache.length

    @torch.no_grad()
    def cached(self) -> torch.Tensor:
        self.cache.length = self.filled  # forget the previous step's position: same work every time
        return self.model(self.ids[:, -1:], cache=self.cache)[:, -1]

    @torch.no_grad()
    def recomputed(self) -> torch.Tensor:
        return self.model(self.ids, last=1)[:, -1]


def measure_timing(lengths=LENGTHS, repeats: int = REPEATS, variant: str = "llama", seed: int = 0,
                   threads: int = 1) -> dict:
    """Time per generated token, with and without the cache, at each sequence length.

    Random weights (timing does not depend on what the weights learned), batch 1, float32,
    `threads` torch threads. Each repeat is one round over every length (one untimed warm-up
    call each way, then one timed call with the cache and one without), so a busy spell on
    the machine spreads over all lengths; the result is the median over rounds, in
    milliseconds. Returns a JSON-able dict
    that records the machine it ran on.
    """
    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 2 or repeats < 1:
        raise ValueError(f"need lengths >= 2 and repeats >= 1, got {lengths!r}, {repeats!r}")
    cfg = variant_config(variant)
    if cfg.position == "learned" and max(lengths) > cfg.max_seq_len:
        raise ValueError(f"{variant} has a learned table of {cfg.max_seq_len} positions")
    with torch_threads(threads):
        model = TinyLlama(cfg, seed=seed).eval()
        g = torch.Generator().manual_seed(seed)
        steps = [_Step(model, torch.randint(0, cfg.vocab_size, (1, n), generator=g)) for n in lengths]
        for s in steps:  # the two paths give the same next-token logits; then warm up
            torch.testing.assert_close(s.cached(), s.recomputed(), rtol=0, atol=1e-4)
            s.cached(), s.recomputed()
        t_cache = [[] for _ in lengths]
        t_full = [[] for _ in lengths]
        for _ in range(repeats):
            for i, s in enumerate(steps):
                s.cached(), s.recomputed()  # untimed: warm the caches after the previous length
                t0 = time.perf_counter()
                s.cached()
                t1 = time.perf_counter()
                s.recomputed()
                t2 = time.perf_counter()
                t_cache[i].append(t1 - t0)
                t_full[i].append(t2 - t1)
        machine = environment()  # cpu model, torch version, threads (as set here), python, platform
        machine["cores"] = os.cpu_count()
        machine["load_average_1min"] = round(os.getloadavg()[0], 2)  # how busy the machine was
    return {"what": "milliseconds to produce one next token after a sequence of `lengths` tokens: "
                    "with the KV cache (one new position) and by recomputing every position",
            "variant": variant, "seed": seed, "batch": 1, "dtype": "float32", "repeats": repeats,
            "statistic": "median", "lengths": lengths,
            "cached_ms": [round(1000 * statistics.median(t), 4) for t in t_cache],
            "recompute_ms": [round(1000 * statistics.median(t), 4) for t in t_full],
            "machine": machine}


# ---------------------------------------------------------------- measured: generating text

TEXT_PROMPT = "Anne Elliot had been "
TEXT_N_NEW = 480  # ten windows of the text model's 48 characters
TEXT_REPEATS = 15


def measure_text_timing(n_new: int = TEXT_N_NEW, repeats: int = TEXT_REPEATS, prompt: str = TEXT_PROMPT,
                        model=None, threads: int = 1) -> dict:
    """Seconds to generate `n_new` characters greedily with the trained text reference
    (`sampling.sample_text`), through the KV cache and recomputing each window in full,
    and whether the two give the same text. The clock is this process's CPU time
    (`time.process_time`, one torch thread), so other work on the machine does not inflate
    it. Each repeat times one generation each way, in turn; the result is the median over
    repeats, with the characters per CPU second it means. `model` defaults to
    `helpers.text.reference_text_model()`. Returns a JSON-able dict that records the
    machine it ran on."""
    if n_new < 1 or repeats < 1:
        raise ValueError(f"need n_new >= 1 and repeats >= 1, got {n_new!r}, {repeats!r}")
    with torch_threads(threads):
        model = (model if model is not None else reference_text_model()).eval()
        ids = encode(prompt)
        cached, recomputed = (sample_text(model, ids, n_new, use_cache=u) for u in (True, False))  # warm-up
        t_cache, t_full = [], []
        for _ in range(repeats):
            t0 = time.process_time()
            sample_text(model, ids, n_new, use_cache=True)
            t1 = time.process_time()
            sample_text(model, ids, n_new, use_cache=False)
            t2 = time.process_time()
            t_cache.append(t1 - t0)
            t_full.append(t2 - t1)
        machine = environment()
        machine["cores"] = os.cpu_count()
        machine["load_average_1min"] = round(os.getloadavg()[0], 2)
    cached_s, full_s = statistics.median(t_cache), statistics.median(t_full)
    return {"what": "CPU seconds to generate `n_new` characters greedily with the trained text reference: "
                    "through the KV cache, and recomputing each window in full",
            "clock": "time.process_time",
            "variant": "llama", "seed": 0, "prompt": prompt, "n_new": n_new, "window": model.cfg.max_seq_len,
            "repeats": repeats, "statistic": "median", "dtype": "float32",
            "cached_s": round(cached_s, 4), "recompute_s": round(full_s, 4),
            "cached_chars_per_s": round(n_new / cached_s, 1),
            "recompute_chars_per_s": round(n_new / full_s, 1),
            "identical": bool(torch.equal(cached, recomputed)), "machine": machine}
