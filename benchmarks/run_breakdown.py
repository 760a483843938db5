"""Where one study run's seconds go: compiling, training steps, evaluating, drawing data.

    python benchmarks/run_breakdown.py                              # llama, recall, fresh, seed 0
    python benchmarks/run_breakdown.py addition llama finite 9      # task variant regime seed

`study_plan.py --bound` prices the plan's training steps alone; a run's recorded seconds
(what the plan's wall time adds up) hold more. This trains one run of the plan exactly as
`llamanat study` does (`loop.fit`, compiled unless LLAMANAT_COMPILE=0, one thread) and
times its parts from outside, by wrapping the functions `fit` calls:

- first step:   the first call of the training step: compiling its graph (on a cold
                compile cache 20-30 s; from torch's on-disk cache a few; a pool worker
                that already trained the architecture pays nothing)
- steps:        every later training step, with its batch's `.item()` (the loss)
- validation:   the dense curve's validation loss and accuracy at the training length
- scoring:      every other scoring: the longer recall lengths on the dense curve, the
                test set at the checkpoints and at the stop
- rest:         the run's seconds minus all of the above: drawing the batches (a fresh
                stream draws and de-duplicates new items), the loop itself

Run it twice: the first run in a new process compiles (or reads the on-disk cache), so
`first step` shows what a pool worker pays once per architecture.
"""
from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

from llamanat_core.study import plan, unique_runs
from llamanat_core.train import compiled, loop
from llamanat_core.util import torch_threads

PARTS = ("first step", "steps", "validation", "scoring", "rest")


@contextmanager
def timed_parts():
    """Wrap what `loop.fit` calls; yield a dict that fills with seconds and call counts."""
    t = {p: 0.0 for p in PARTS} | {"n_steps": 0, "n_validation": 0, "n_scoring": 0}
    saved = {name: getattr(loop, name) for name in ("loss_and_score", "score", "eval_loss")}
    step_call = compiled.FastStep.__call__
    inside = []  # the part being timed: a call made from inside it is that part's own

    def wrap(f, part):
        def g(*a, **kw):
            if inside:  # loss_and_score of a multi-token answer calls eval_loss and score
                return f(*a, **kw)
            inside.append(part)
            s = time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                t[part] += time.perf_counter() - s
                t[f"n_{part}"] += 1
                inside.pop()
        return g

    def step(self, ids):
        s = time.perf_counter()
        loss = step_call(self, ids)
        loss.item()  # fit reads it at once: wait for the step here, not in the next part
        part = "steps" if t["first step"] else "first step"
        t[part] += time.perf_counter() - s
        t["n_steps"] += part == "steps"
        return loss

    loop.loss_and_score = wrap(saved["loss_and_score"], "validation")
    loop.score = wrap(saved["score"], "scoring")
    loop.eval_loss = wrap(saved["eval_loss"], "scoring")
    compiled.FastStep.__call__ = step
    try:
        yield t
    finally:
        for name, f in saved.items():
            setattr(loop, name, f)
        compiled.FastStep.__call__ = step_call


def find_run(task: str, variant: str, regime: str, seed: int):
    """The plan's run of (task, variant, regime, seed) with the reference's base and answer."""
    runs = [r for r in unique_runs(plan()) if (r.task, r.variant, r.regime, r.seed)
            == (task, variant, regime, seed) and not r.overrides and r.answer == "name"]
    if not runs:
        raise SystemExit(f"the plan has no run {variant} {task} {regime} seed={seed}")
    return runs[0]


def breakdown(run, budget=None, compile: bool | None = None) -> dict:
    """Train `run` (under `budget` and `compile`, default the run's own) and return the
    seconds of each part, the run's recorded seconds and its stop step."""
    compile = run.compile if compile is None else compile
    with torch_threads(1), timed_parts() as t:
        res = loop.fit(run.config, run.spec, run.seed, budget or run.budget, compile=compile)
    t["rest"] = res.seconds - sum(t[p] for p in PARTS if p != "rest")
    t["seconds"], t["stop_step"] = res.seconds, res.stop_step
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", nargs="?", default="recall", choices=("addition", "recall"))
    ap.add_argument("variant", nargs="?", default="llama")
    ap.add_argument("regime", nargs="?", default="fresh", choices=loop.REGIMES)
    ap.add_argument("seed", nargs="?", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2, help="train it this many times in this process")
    args = ap.parse_args()
    run = find_run(args.task, args.variant, args.regime, args.seed)
    print(f"{run.label}: compiled={run.compile}, one thread")
    for i in range(args.repeat):
        t = breakdown(run)
        steps = max(t["n_steps"], 1)
        print(f"  run {i + 1}: {t['seconds']:.1f} s to step {t['stop_step']:,}")
        for p in PARTS:
            extra = {"steps": f"  {1000 * t['steps'] / steps:.2f} ms each",
                     "validation": f"  {t['n_validation']} evaluations",
                     "scoring": f"  {t['n_scoring']} calls"}.get(p, "")
            print(f"    {p:<11} {t[p]:7.1f} s  {100 * t[p] / t['seconds']:5.1f} %{extra}")


if __name__ == "__main__":
    main()
