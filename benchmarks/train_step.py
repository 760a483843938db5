"""Benchmark: one AdamW training step, ours against transformers, and the FLOP floor.

    python benchmarks/train_step.py            # ~1-2 minutes at 1 thread

Everything is measured side by side in one process at 1 torch thread, batch 64, at
the training lengths of both tasks (13 input tokens: 3-digit addition and 4-pair recall;
addition supervises its 6 answer positions, recall its 1): the candidates, and the large
matmul that sets the floor, are interleaved repeat by repeat and the median is printed, so
load from other processes hits all of them alike. Times are the thread's CPU time, which
time slices taken by other processes do not inflate (a shared cache or memory bus still
does); the ratios to the floor are the numbers to compare across machines.

- ours:         the step exactly as `loop.fit` runs it (`compiled.FastStep`: flat
                parameters; forward, backward, clip and AdamW in one compiled graph unless
                LLAMANAT_COMPILE=0)
- ours, eager:  the same step with compilation off
- full guards:  what our compiled step would cost more under dynamo's default guards
                (~700 checks of the template, the parameter names, lr and clip before
                every call) than under those on its tensors and the process's state
                (`compiled.tensor_and_state_guards`): the same graph and numbers, timed against
                ours in paired repeats
- transformers: `LlamaForCausalLM` on the same config and weights (eager attention),
                loss on the same positions, clip_grad_norm_ + AdamW(foreach)
- FLOP floor:   the step's matmul FLOPs / the GFLOP/s of one large fp32 matmul,
                timed in the same interleaved loop
- in GEMMs:     the CPU time of our compiled step spent inside its matrix multiplies,
                read by torch's profiler from the same graph built with inductor's Python
                wrapper (the C++ wrapper calls the same kernels but hides them from the
                profiler); what is left over is everything else: norms, softmax, RoPE,
                SiLU, their backward, clipping, AdamW and the call itself
Then the text task's step (64 windows of 48 characters, loss on every position) at both
model sizes (S, the reference; M, twice its width): ours compiled (what every run of the
tuned text study takes), ours eager (the plain loop, the reference), transformers on the
same weights and windows, and the FLOP floor (the head now at every position); then the
tuned text study's plan priced from those step times.
Then scoring 200 addition items: batched generation with a KV cache (`loop.score`)
against one-at-a-time generation recomputing the whole prefix each token.
"""
from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from llamanat_core.data.text import VOCAB_SIZE, gather, load_corpus, training_windows
from llamanat_core.model.config import SIZES, variant_config
from llamanat_core.model.hf import to_transformers
from llamanat_core.model.model import TinyLlama
from llamanat_core.study.text_recipe import plan_estimate, recipe_budget
from llamanat_core.train.compiled import FastStep, compile_default, train_step, train_step_copy
from llamanat_core.train.loop import TaskSpec, batch_order, score
from llamanat_core.train.text import TextBudget, held_out_loss, text_step
from llamanat_core.util import torch_threads

BATCH, REPEATS, STEPS_PER_REPEAT, WARMUP = 64, 7, 20, 10
PROFILED_STEPS = 50  # steps under the profiler in `gemm_profile`
GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def task_batches(task: str, n_items: int = 4000, batch: int = BATCH, steps: int = 60):
    """(training set, its first `steps` batches in the finite regime's order) of `task`."""
    data = TaskSpec(task).make(0).splits(n_items, 0, 0).train
    return data, list(data.ids[batch_order(n_items, batch, steps, 0)])


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
    """Median CPU ms per call; candidates interleaved repeat by repeat."""
    for fn in candidates.values():
        for i in range(WARMUP):
            fn(batches[i % len(batches)])
    times = {k: [] for k in candidates}
    for r in range(REPEATS):
        for k, fn in candidates.items():
            times[k].append(ms_per_call(fn, batches, r))
    return {k: statistics.median(v) for k, v in times.items()}


def ms_per_call(fn, batches, repeat: int) -> float:
    """CPU ms per call of `fn` over one repeat's STEPS_PER_REPEAT batches."""
    t = time.thread_time()
    for i in range(STEPS_PER_REPEAT):
        fn(batches[(repeat * STEPS_PER_REPEAT + i) % len(batches)])
    return (time.thread_time() - t) / STEPS_PER_REPEAT * 1e3


PAIRED_REPEATS = 40


def paired_difference(a, b, batches) -> float:
    """Median over repeats of (ms per call of a) - (ms per call of b), the two timed
    back to back in alternating order: a difference of a few per cent of a step, which
    the spread of separate medians hides."""
    diffs = []
    for r in range(PAIRED_REPEATS):
        ms = {fn: ms_per_call(fn, batches, r) for fn in ((a, b) if r % 2 else (b, a))}
        diffs.append(ms[a] - ms[b])
    return statistics.median(diffs)


MATMUL_N = 1024


def large_matmul():
    """One fp32 matmul of two MATMUL_N x MATMUL_N matrices, the floor's rate; it takes a
    batch argument so that it interleaves with the steps."""
    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    out = torch.empty(MATMUL_N, MATMUL_N)
    return lambda _batch: torch.mm(a, b, out=out)


def step_flops(cfg, t: int, answer_len: int, batch: int = BATCH, truncated: bool = False,
               attention: bool = True) -> float:
    """Matmul FLOPs of one training step: forward 2 per multiply-add, backward twice that.

    Per token and layer: Q/K/V/O projections and the MLP; attention scores and the
    weighted sum; the head only at the supervised positions. `truncated` counts what we
    compute: the last layer's queries, O, MLP and head only at the supervised rows.
    `attention=False` leaves out the scores and the weighted sum, which our step computes
    as fused element-wise products rather than matrix multiplies.
    """
    d, hd = cfg.d_model, cfg.head_dim
    qo = 2 * d * cfg.n_heads * hd
    kv = 2 * d * cfg.n_kv_heads * hd
    mlp = 3 * d * cfg.d_ff
    attn = lambda tq: 2 * cfg.n_heads * hd * (tq * (t + 1) / 2 if tq == t else tq * t)
    macs = 0.0
    for layer in range(cfg.n_layers):
        rows = answer_len if truncated and layer == cfg.n_layers - 1 else t
        macs += t * kv + rows * (qo + mlp) + (attn(rows) if attention else 0)
    macs += answer_len * d * cfg.vocab_size
    return 3 * 2 * macs * batch  # forward + backward (2x forward)


@contextmanager
def quiet_native_stderr():
    """Silence file descriptor 2 for the block: the profiler's C++ side prints a line
    at every start and stop, which would interleave with the table."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# What the profiled compiled step spends its time on, by the names inductor gives its
# fused kernels (each lists the operations it fuses) and the frames around the call.
# First match wins: a kernel fusing the loss's log-softmax also names `_softmax`.
PARTS = (
    ("matrix multiplies", GEMMS),
    ("loss (log-softmax)", ("log_softmax",)),
    ("clipping + AdamW", ("lerp", "vector_norm")),
    ("attention softmax", ("_softmax",)),
    ("MLP activation", ("silu", "sigmoid", "gelu")),
    ("norms, RoPE, embedding", ("graph_",)),  # every other fused kernel
)
OVERHEAD = "calling the graph"  # dynamo's guards, the wrapper, the autograd-free runtime


def step_part(name: str) -> str:
    """The part of the step a profiled event named `name` belongs to."""
    if name in GEMMS:
        return PARTS[0][0]
    for part, keys in PARTS[1:]:
        if any(k in name for k in keys):
            return part
    return OVERHEAD


def gemm_profile(step, batches, steps: int | None = None) -> tuple[float, Counter, Counter]:
    """(CPU ms per step inside matrix multiplies, Counter of (m, k, n) per step,
    Counter of CPU ms per step by part of the step, see `step_part`) for `step`.

    The profiler sees only operators that go through torch's dispatcher: an eager step,
    or a compiled one built with the Python wrapper (see `profiled_graph`).
    """
    from torch.profiler import ProfilerActivity, profile
    steps = PROFILED_STEPS if steps is None else steps
    for i in range(WARMUP):
        step(batches[i % len(batches)])
    with quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU],
                                        record_shapes=True) as prof:
        for i in range(steps):
            step(batches[i % len(batches)])
    shapes, parts = Counter(), Counter()
    for e in prof.events():
        parts[step_part(e.name)] += e.self_cpu_time_total / steps / 1e3
        if e.name in GEMMS:
            a, b = e.input_shapes[1:3] if "addmm" in e.name else e.input_shapes[:2]
            shapes[(*a[-2:], b[-1])] += 1
    return (parts["matrix multiplies"], Counter({k: v // steps for k, v in shapes.items()}),
            parts)


def gemm_flops(shapes: Counter) -> float:
    return sum(2 * m * k * n * count for (m, k, n), count in shapes.items())


def profiled_graph(model: TinyLlama, answer_len: int) -> FastStep:
    """Our compiled step with inductor's Python wrapper: the same kernels, visible to the
    profiler (`fast` builds it with the C++ wrapper, which calls them directly), each
    fused kernel recorded under its name."""
    step = FastStep(model, answer_len, 1e-3, 1.0, compile=False)
    step.step_fn = torch.compile(train_step, dynamic=False,
                                 options={"cpp.enable_kernel_profile": True})
    return step


def fully_guarded(model: TinyLlama, answer_len: int) -> FastStep:
    """Our compiled step under dynamo's default guards: the same graph (inductor's cache
    hands the same kernels back), checked the way a plain `torch.compile` checks it."""
    step = FastStep(model, answer_len, 1e-3, 1.0, compile=False)
    step.step_fn = torch.compile(train_step_copy(), dynamic=False, options={"cpp_wrapper": True})
    return step


def print_parts(profiles: dict[str, Counter]) -> None:
    """Where the profiled compiled step's CPU time goes, per task: ms and share."""
    tasks = list(profiles)
    print("where the compiled step's time goes (the profiled build: Python wrapper, kernels"
          " recorded); ms per step")
    print(f"{'':24s}" + "".join(f"{t:>16s}" for t in tasks))
    for part in [p for p, _ in PARTS] + [OVERHEAD, "total"]:
        cells = []
        for t in tasks:
            total = sum(profiles[t].values())
            ms = total if part == "total" else profiles[t][part]
            cells.append(f"{ms:8.2f} {100 * ms / total:5.1f} %")
        print(f"{part:24s}" + "".join(f"{c:>16s}" for c in cells))
    print(f"  '{OVERHEAD}': dynamo's guard check on the arguments (all of them in this"
          "\n  build), the wrapper's Python and the runtime around the graph; `fast` builds"
          "\n  the C++ wrapper and checks only the guards on the tensors and the state,"
          "\n  which drops most of it.\n")


def measure_task(cfg, task: str) -> tuple[tuple, dict]:
    """One task's row of the table (step times, floors, first-step seconds, time in the
    matrix multiplies) and its profile by part."""
    data, batches = task_batches(task)
    t, alen = data.ids.shape[1] - 1, data.answer_len
    t0 = time.perf_counter()
    ours = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0)
    ours(batches[0])
    compile_s = time.perf_counter() - t0
    eager = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0, compile=False)
    guarded = fully_guarded(TinyLlama(cfg, 0).train(), alen)
    hf = hf_step(hf_model(TinyLlama(cfg, 0)), alen)
    ms = side_by_side({"ours": ours, "eager": eager, "hf": hf, "matmul": large_matmul()},
                      batches)
    ms["guards"] = paired_difference(guarded, ours, batches)
    gflops = 2 * MATMUL_N ** 3 / ms["matmul"] / 1e6
    full, trunc = step_flops(cfg, t, alen), step_flops(cfg, t, alen, truncated=True)
    in_gemms, shapes, parts = gemm_profile(profiled_graph(TinyLlama(cfg, 0).train(), alen),
                                           batches)
    row = (task, t, alen, ms, gflops, full / gflops / 1e6, trunc / gflops / 1e6,
           compile_s, in_gemms, gemm_flops(shapes) / in_gemms / 1e6)
    return row, parts


def print_table(rows) -> None:
    """The step times against their floors, then what dynamo's full guards would cost."""
    print(f"{'task':9s} {'T':>3s} {'sup':>3s} {'GFLOP/s':>7s} {'floor':>6s} {'ours':>12s} "
          f"{'eager':>12s} {'transformers':>13s} {'our floor':>9s} {'in GEMMs':>12s} "
          f"{'1st step s':>10s}")
    for task, t, alen, ms, gflops, floor, our_floor, compile_s, in_gemms, rate in rows:
        cells = [f"{ms[k]:6.2f} {ms[k] / floor:4.2f}x" for k in ("ours", "eager", "hf")]
        print(f"{task:9s} {t:3d} {alen:3d} {gflops:7.0f} {floor:6.2f} {cells[0]:>12s} "
              f"{cells[1]:>12s} {cells[2]:>13s} {our_floor:9.2f} {in_gemms:5.2f} {rate:3.0f} GF/s "
              f"{compile_s:10.1f}")
    print("  ms per step and its ratio to the floor; floor = the full step's matmul FLOPs at"
          "\n  the large-matmul rate (GFLOP/s) of the same run; 'our floor' counts what fit"
          "\n  computes (last layer's queries/MLP/head only at supervised rows); 'in GEMMs' ="
          "\n  ms of our step inside its matrix multiplies (profiled) and the rate they reach"
          "\n  at these shapes; '1st step s' = first compiled step incl. compilation (cheap"
          "\n  once the on-disk inductor cache holds the graph).\n")
    for task, _t, _alen, ms, *_ in rows:
        print(f"{task}: dynamo's full guards cost {ms['guards']:+.2f} ms a step "
              f"({ms['guards'] / ms['ours']:+.1%} of ours, which checks only its tensors and the state)")
    print(f"  median of {PAIRED_REPEATS} paired repeats of {STEPS_PER_REPEAT} steps, in "
          "alternating order: a difference this small needs more repeats than the table\n")


def text_batches(budget: TextBudget, steps: int = 60) -> list:
    """The first `steps` batches of seed 0's training windows, (B, context + 1) each."""
    train = load_corpus().train
    starts = training_windows(train, budget.context, budget.batch_size, steps, 0)
    return [gather(train, s, budget.context + 1) for s in starts]


def text_sizes(budget: TextBudget, batches) -> dict:
    """Per model size: ms per step of ours (compiled), ours eager, transformers and the
    large matmul, interleaved, and the step's FLOP floor at that run's matmul rate."""
    out = {}
    t = budget.context
    for size in SIZES:
        cfg = variant_config("llama", size=size, vocab_size=VOCAB_SIZE)
        t0 = time.perf_counter()
        ours = text_step(TinyLlama(cfg, 0).train(), budget, compile=True)
        ours(batches[0])
        compile_s = time.perf_counter() - t0
        eager = text_step(TinyLlama(cfg, 0).train(), budget, compile=False)
        hf = hf_step(hf_model(TinyLlama(cfg, 0)), t)  # the loss on all t positions
        ms = side_by_side({"ours": ours, "eager": eager, "hf": hf, "matmul": large_matmul()}, batches)
        gflops = 2 * MATMUL_N ** 3 / ms["matmul"] / 1e6
        floor = step_flops(cfg, t, t, batch=budget.batch_size) / gflops / 1e6
        out[size] = {"ms": ms, "floor": floor, "compile_s": compile_s,
                     "params": TinyLlama(cfg, 0).num_parameters(),
                     "eval_s": eval_seconds(TinyLlama(cfg, 0), recipe_budget())}
    return out


def eval_seconds(model: TinyLlama, budget: TextBudget) -> float:
    """CPU seconds of one run's evaluations under `budget`, timed call by call: the
    validation curve, the loss at half the budget, the endpoints at three lengths and the
    validation half at the end."""
    corpus = load_corpus()

    def timed(text, context, limit=None) -> float:
        t = time.thread_time()
        held_out_loss(model, text, context, limit)
        return time.thread_time() - t

    curve = budget.steps // budget.eval_every * timed(corpus.val, budget.context, budget.eval_windows)
    half = timed(corpus.test, budget.context)  # the loss at half the budget
    ends = sum(timed(corpus.test, k * budget.context) for k in (1,) + budget.longer)
    return curve + half + ends + timed(corpus.val, budget.context)


def print_text_step() -> None:
    """The text step at both sizes: ours compiled (what every run of the tuned study
    takes), ours eager (the plain loop, the reference), transformers, the floor; then the
    tuned study's plan priced from these step times."""
    budget = TextBudget(decay="matrices")
    t = budget.context
    sizes = text_sizes(budget, text_batches(budget))
    print(f"text step ({budget.batch_size} windows of {t} characters, loss on every position), "
          "ms and ratio to the floor:")
    print(f"{'size':4s} {'params':>8s} {'floor':>6s} {'ours':>13s} {'eager':>13s} {'transformers':>13s}"
          f" {'tf / ours':>9s} {'1st step s':>10s}")
    for size, m in sizes.items():
        ms, floor = m["ms"], m["floor"]
        cells = [f"{ms[k]:6.1f} {ms[k] / floor:4.2f}x" for k in ("ours", "eager", "hf")]
        print(f"{size:4s} {m['params']:8,d} {floor:6.1f} {cells[0]:>13s} {cells[1]:>13s} {cells[2]:>13s}"
              f" {ms['hf'] / ms['ours']:9.2f} {m['compile_s']:10.1f}")
    print("  ours = the compiled step (fast.FastStep on every position, the scheduled rate, decay on"
          "\n  matrices); eager = the plain loop (train.PlainStep), the tested reference\n")
    print_plan_estimate({size: m["ms"]["ours"] for size, m in sizes.items()},
                        {size: m["eval_s"] for size, m in sizes.items()})


def print_plan_estimate(step_ms: dict[str, float], eval_s: dict[str, float]) -> None:
    """The tuned text study's plan (`study.text_recipe.plan_estimate`), priced at these
    step and evaluation times: runs per size and stage, CPU hours, wall hours at two workers."""
    est = plan_estimate(step_ms, eval_s)
    for size, secs in eval_s.items():
        print(f"  a run's evaluations at {size}: {secs:.1f} s of CPU")
    print("the tuned text study priced at these step times (steps and evaluations, one core a run):")
    for row in est["rows"]:
        print(f"  {row['stage']:<34s} {row['size']:2s} {row['runs']:5d} runs x {row['seconds']:6.0f} s"
              f" = {row['runs'] * row['seconds'] / 3600:6.1f} CPU h")
    print(f"  total {est['cpu_hours']:.1f} CPU h: {est['wall_hours']:.1f} h wall at two workers\n")


def print_scoring(cfg) -> None:
    """Scoring 200 addition items: batched with the KV cache against one at a time without."""
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
        t0 = time.thread_time()
        batched()
        cached_ms.append((time.thread_time() - t0) * 1e3)
        t0 = time.thread_time()
        one_at_a_time()
        uncached_ms.append((time.thread_time() - t0) * 1e3)
    c, u = statistics.median(cached_ms), statistics.median(uncached_ms)
    print(f"scoring 200 addition items: batched + KV cache {c:.1f} ms, one at a time "
          f"uncached {u:.1f} ms, ratio {u / c:.1f}x")


def main() -> None:
    torch.manual_seed(0)
    cfg = variant_config("llama")
    print(f"torch {torch.__version__}, 1 thread, batch {BATCH}, compile="
          f"{'on' if compile_default() else 'off'}; CPU ms per step, median of {REPEATS} "
          "interleaved repeats\n")
    rows, profiles = [], {}
    for task in ("addition", "recall"):
        row, profiles[task] = measure_task(cfg, task)
        rows.append(row)
    print_table(rows)
    print_parts(profiles)
    print_text_step()
    print_scoring(cfg)


if __name__ == "__main__":
    with torch_threads(1):
        main()
