"""Benchmark: one AdamW training step, ours against transformers, and the FLOP floor.

    python benchmarks/train_step.py            # ~1-2 minutes at 1 thread

Everything is measured side by side in one process at 1 torch thread, batch 64, at
the training lengths of both tasks (13 input tokens: 3-digit addition and 4-pair recall;
addition supervises its 6 answer positions, recall its 1): the candidates are interleaved
repeat by repeat and the median is printed, so load from other processes hits all of them alike.

- ours:         the step exactly as `train.fit` runs it (`fast.FastStep`: flat
                parameters, compiled loss unless LLAMANAT_COMPILE=0, clip, fused AdamW)
- ours, eager:  the same step with compilation off
- transformers: `LlamaForCausalLM` on the same config and weights (eager attention),
                loss on the same positions, clip_grad_norm_ + AdamW(foreach)
- FLOP floor:   the step's matmul FLOPs / the GFLOP/s of one large fp32 matmul
Then scoring 200 addition items: batched generation with a KV cache (`train.score`)
against one-at-a-time generation recomputing the whole prefix each token.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from llamanat_core.config import variant_config
from llamanat_core.fast import FastStep, compile_default
from llamanat_core.hf import to_transformers
from llamanat_core.model import TinyLlama
from llamanat_core.train import TaskSpec, batch_order, score
from llamanat_core.util import torch_threads

BATCH, REPEATS, STEPS_PER_REPEAT, WARMUP = 64, 7, 20, 10


def hf_model(model: TinyLlama):
    return to_transformers(model).train()


def hf_step(hf, answer_len: int):
    opt = torch.optim.AdamW(hf.parameters(), lr=1e-3, foreach=True)
    params = list(hf.parameters())

    def step(ids):
        logits = hf(input_ids=ids[:, :-1], logits_to_keep=answer_len).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               ids[:, -answer_len:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        return loss.detach()
    return step


def side_by_side(candidates: dict, batches) -> dict:
    """Median ms per call; candidates interleaved repeat by repeat."""
    for fn in candidates.values():
        for i in range(WARMUP):
            fn(batches[i % len(batches)])
    times = {k: [] for k in candidates}
    for r in range(REPEATS):
        for k, fn in candidates.items():
            t = time.perf_counter()
            for i in range(STEPS_PER_REPEAT):
                fn(batches[(r * STEPS_PER_REPEAT + i) % len(batches)])
            times[k].append((time.perf_counter() - t) / STEPS_PER_REPEAT * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def matmul_gflops() -> float:
    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        ts.append((time.perf_counter() - t) / 5)
    return 2 * n ** 3 / statistics.median(ts) / 1e9


def step_flops(cfg, t: int, answer_len: int, batch: int = BATCH, truncated: bool = False) -> float:
    """Matmul FLOPs of one training step: forward 2 per multiply-add, backward twice that.

    Per token and layer: Q/K/V/O projections and the MLP; attention scores and the
    weighted sum; the head only at the supervised positions. `truncated` counts what we
    compute: the last layer's queries, O, MLP and head only at the supervised rows.
    """
    d, hd = cfg.d_model, cfg.head_dim
    qo = 2 * d * cfg.n_heads * hd
    kv = 2 * d * cfg.n_kv_heads * hd
    mlp = 3 * d * cfg.d_ff
    attn = lambda tq: 2 * cfg.n_heads * hd * (tq * (t + 1) / 2 if tq == t else tq * t)
    macs = 0.0
    for layer in range(cfg.n_layers):
        rows = answer_len if truncated and layer == cfg.n_layers - 1 else t
        macs += t * kv + rows * (qo + mlp) + attn(rows)
    macs += answer_len * d * cfg.vocab_size
    return 3 * 2 * macs * batch  # forward + backward (2x forward)


def main() -> None:
    torch.manual_seed(0)
    cfg = variant_config("llama")
    gflops = matmul_gflops()
    print(f"torch {torch.__version__}, 1 thread, batch {BATCH}, compile="
          f"{'on' if compile_default() else 'off'}; large fp32 matmul: {gflops:.0f} GFLOP/s\n")
    rows = []
    for task in ("addition", "recall"):
        data = TaskSpec(task).make(0).splits(4000, 0, 0).train
        order = batch_order(4000, BATCH, 60, 0)
        batches = list(data.ids[order])
        t, alen = data.ids.shape[1] - 1, data.answer_len
        t0 = time.perf_counter()
        ours = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0)
        ours(batches[0])
        compile_s = time.perf_counter() - t0
        eager = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0, compile=False)
        hf = hf_step(hf_model(TinyLlama(cfg, 0)), alen)
        ms = side_by_side({"ours": ours, "eager": eager, "hf": hf}, batches)
        full, trunc = step_flops(cfg, t, alen), step_flops(cfg, t, alen, truncated=True)
        rows.append((task, t, alen, ms, full, trunc, compile_s))
    print(f"{'task':9s} {'T':>3s} {'sup':>3s} {'ours ms':>8s} {'eager ms':>9s} {'HF ms':>7s} "
          f"{'HF/ours':>8s} {'GFLOP':>6s} {'floor ms':>9s} {'ours GFLOP':>11s} {'our floor':>10s} "
          f"{'1st step s':>10s}")
    for task, t, alen, ms, full, trunc, compile_s in rows:
        print(f"{task:9s} {t:3d} {alen:3d} {ms['ours']:8.2f} {ms['eager']:9.2f} {ms['hf']:7.2f} "
              f"{ms['hf'] / ms['ours']:7.2f}x {full / 1e9:6.3f} {full / gflops / 1e6:9.2f} "
              f"{trunc / 1e9:11.3f} {trunc / gflops / 1e6:10.2f} {compile_s:10.1f}")
    print("  floor = the full step's matmul FLOPs at the large-matmul rate; 'our floor' counts"
          "\n  what fit computes (last layer's queries/MLP/head only at supervised rows);"
          "\n  '1st step s' = first compiled step incl. compilation (cheap once the on-disk"
          "\n  inductor cache holds the graph).\n")

    # scoring 200 addition items
    task = TaskSpec("addition").make(0)
    test = task.splits(4000, 200, 200).test
    model = TinyLlama(cfg, 0).eval()
    prompt = test.prompt

    def batched():
        return score(model, task, test)

    def one_at_a_time():
        with torch.no_grad():
            return [model.generate(prompt[i:i + 1], test.answer_len, use_cache=False)
                    for i in range(len(test))]

    cached_ms, uncached_ms = [], []
    batched(), one_at_a_time()
    for _ in range(3):
        t0 = time.perf_counter()
        batched()
        cached_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        one_at_a_time()
        uncached_ms.append((time.perf_counter() - t0) * 1e3)
    c, u = statistics.median(cached_ms), statistics.median(uncached_ms)
    print(f"scoring 200 addition items: batched + KV cache {c:.1f} ms, one at a time "
          f"uncached {u:.1f} ms, ratio {u / c:.1f}x")


if __name__ == "__main__":
    with torch_threads(1):
        main()
