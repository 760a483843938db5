"""Wall time of the whole study plan at N workers: recorded, projected from a sample, or run.

    python benchmarks/study_plan.py                 # what the committed run files recorded
    python benchmarks/study_plan.py --sample 12     # re-time 12 runs here, project the plan
    python benchmarks/study_plan.py --run -w 2      # train the whole plan into a temp dir
    python benchmarks/study_plan.py --bound         # what the plan's steps cost here, at least
    python benchmarks/study_plan.py --text          # what the text study's run files recorded
    python benchmarks/study_plan.py --text --run    # train the text study's first ten seeds

Recorded: each committed run file holds the seconds its fit took (compile and every
evaluation included) and the step it stopped at; their sum over workers is the plan's
wall time if the pool were perfectly packed, and a longest-first packing of those
seconds onto N workers gives the wall time to expect.

--sample K re-trains K runs spread evenly over the plan (every task, regime and variant
appear for K >= 20), one at a time, on this machine, and compares their seconds with the
recorded ones: the ratio scales the recorded plan to this machine. It also says how
many of the re-trained run files equal the committed ones bit for bit (they do on the
CPU that made the study; another CPU rounds differently, see `llamanat verify`).

--bound measures the reference's training step on this machine (each task, compiled as
`fit` runs it, and the part of it spent inside matrix multiplies, profiled; see
`train_step.py`) and multiplies by the plan's recorded training steps of each task: the
wall time the training steps alone take here at N workers, and the time their matrix
multiplies alone take, which no speed-up of everything around them can beat. Evaluation,
compilation and data come on top. (The reference's step stands for every variant's.)

--run trains everything (an hour or more) and checks every run file against the
committed one. Time it on a quiet machine: other work on the cores slows every run.
--keep DIR trains into DIR instead of a temporary folder and leaves the run files there
(to compare a study re-made on another CPU with the committed one); DIR resumes an
interrupted run, but its wall time then covers only the runs that were left.

--text --run trains the text study's first ten seeds (every arm, 110 runs; the corpus from
`make corpus`) the same way and times them: the goal is 90 minutes at 2 workers.
"""
from __future__ import annotations

import argparse
import heapq
import json
import statistics
import tempfile
import time
from pathlib import Path

from llamanat_core.study import STUDY_DIR, committed_entries, plan, run_path, run_study, unique_runs
from llamanat_core.study.text_plan import TEXT_SEEDS

TARGET_MIN = 60  # the whole plan's wall time at 2 workers that the study aims for


def recorded(runs) -> list[dict]:
    try:
        return list(committed_entries(STUDY_DIR, runs).values())
    except ValueError as e:
        raise SystemExit(f"{e}; run `llamanat study` first") from None


def packed_wall(seconds, workers: int) -> float:
    """Longest-first onto `workers` queues (what a pool roughly achieves): the busiest queue."""
    queues = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(queues, queues[0] + s)
    return max(queues)


def same_record(a: Path, b: Path) -> bool:
    """The two run files hold the same measurement: everything but how long it took and
    where it ran (`env` names the kernel build too, which changes between machines that
    compute the same bits)."""
    drop = ("seconds", "env")
    return ({k: v for k, v in json.loads(a.read_text()).items() if k not in drop}
            == {k: v for k, v in json.loads(b.read_text()).items() if k not in drop})


def step_costs(task: str) -> tuple[float, float]:
    """(ms per step, ms of it inside matrix multiplies) of the reference's compiled training
    step on `task` at one thread, measured here."""
    import torch
    from train_step import gemm_profile, profiled_graph, side_by_side, task_batches

    from llamanat_core.model.config import variant_config
    from llamanat_core.model.model import TinyLlama
    from llamanat_core.train.compiled import FastStep
    from llamanat_core.util import torch_threads

    with torch_threads(1):
        torch.manual_seed(0)
        cfg = variant_config("llama")
        data, batches = task_batches(task)
        ours = FastStep(TinyLlama(cfg, 0).train(), data.answer_len, 1e-3, 1.0, compile=True)
        ms = side_by_side({"ours": ours}, batches)["ours"]
        in_gemms, _, _ = gemm_profile(profiled_graph(TinyLlama(cfg, 0).train(), data.answer_len),
                                   batches)
    return ms, in_gemms


def bound(entries, workers: int) -> None:
    steps = {}
    for e in entries:
        steps[e["record"]["task"]] = steps.get(e["record"]["task"], 0) + e["stop_step"]
    step_s = gemm_s = 0.0
    for task, n in sorted(steps.items()):
        ms, in_gemms = step_costs(task)
        step_s, gemm_s = step_s + n * ms / 1e3, gemm_s + n * in_gemms / 1e3
        print(f"  {task}: {n:,} steps x {ms:.2f} ms here ({in_gemms:.2f} ms in matrix "
              f"multiplies, {in_gemms / ms:.0%})", flush=True)
    print(f"bound: the training steps alone take {step_s / workers / 60:.1f} min at {workers} "
          f"workers here, their matrix multiplies alone {gemm_s / workers / 60:.1f} min "
          f"(target for the whole plan: {TARGET_MIN} min at 2 workers); evaluation, compilation "
          "and data come on top")


def text_report(workers: int) -> None:
    """The text study's recorded seconds, part by part: one run's time (the goal: at most
    90 s), and each part's wall time at `workers` (the first ten seeds: at most 90 min)."""
    from llamanat_core.analysis.two_stage import text_study_plan

    p = text_study_plan()
    first = {r.key for r in text_first_seeds()}
    parts = {"first ten seeds": [r for r in p["text"] if r.key in first],
             "learning-rate check": [r for r in p["text_lr"] if r.key not in first],
             "added seeds (cached)": [r for r in p["text"] if r.key not in first]}
    for name, runs in parts.items():
        secs = sorted(e["seconds"] for e in recorded(runs))
        if not secs:
            print(f"text, {name}: no runs")
            continue
        print(f"text, {name}: {len(secs)} runs, median {statistics.median(secs):.1f} s, "
              f"90th percentile {secs[int(0.9 * (len(secs) - 1))]:.1f} s, longest {secs[-1]:.1f} s -> "
              f"{packed_wall(secs, workers) / 60:.1f} min at {workers} workers (longest-first packing)")


def text_first_seeds() -> list:
    """The text study's seeds 0-9, every arm: the part whose wall time has a goal."""
    from llamanat_core.analysis.two_stage import text_study_plan

    return unique_runs({"text": [r for r in text_study_plan()["text"] if r.seed in TEXT_SEEDS]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workers", type=int, default=2)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--sample", type=int, metavar="K", help="re-time K runs here and project")
    mode.add_argument("--run", action="store_true", help="train the whole plan into a temp dir")
    mode.add_argument("--bound", action="store_true",
                      help="the least the plan's training steps can take on this machine")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="with --run: train into DIR and keep it")
    ap.add_argument("--text", action="store_true", help="instead: the text study's recorded times")
    args = ap.parse_args()
    if args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    if args.keep is not None and not args.run:
        ap.error("--keep needs --run")
    if args.text and not args.run:
        return text_report(args.workers)
    runs = text_first_seeds() if args.text else unique_runs(plan())
    entries = recorded(runs)
    secs = [e["seconds"] for e in entries]
    stops = [e.get("stop_step") or e["record"]["budget"]["steps"] for e in entries]  # text: fixed
    print(f"plan: {len(runs)} runs, {sum(stops):,} training steps in all "
          f"(median stop {statistics.median(stops):,.0f})")
    print(f"recorded: {sum(secs) / 60:.1f} CPU-min, median {statistics.median(secs):.1f} s per run -> "
          f"{packed_wall(secs, args.workers) / 60:.1f} min at {args.workers} workers (longest-first packing)")
    if args.bound:
        bound(entries, args.workers)
    if args.sample:
        k = min(args.sample, len(runs))
        if k < 1:
            ap.error("--sample must be at least 1")
        picked = [runs[round(i * (len(runs) - 1) / max(k - 1, 1))] for i in range(k)]
        old = [entries[runs.index(r)]["seconds"] for r in picked]
        with tempfile.TemporaryDirectory() as d:
            new = []
            for i, r in enumerate(picked, 1):
                run_study([r], Path(d), workers=1, weights_dir=Path(d) / "weights")
                new.append(json.loads(run_path(Path(d), r).read_text())["seconds"])
                print(f"  [{i}/{k}] {r.label}: {new[-1]:.1f} s here, {old[i - 1]:.1f} s recorded", flush=True)
            same = sum(same_record(run_path(Path(d), r), run_path(STUDY_DIR, r)) for r in picked)
        ratio = sum(new) / sum(old)
        projected = [s * ratio for s in secs]
        print(f"sample: {k} runs, {sum(new):.0f} s here against {sum(old):.0f} s recorded "
              f"(ratio {ratio:.2f}); {same} of {k} run files identical to the committed ones")
        print(f"projected: {sum(projected) / 60:.1f} CPU-min -> "
              f"{packed_wall(projected, args.workers) / 60:.1f} min at {args.workers} workers")
    if args.run:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) if args.keep is None else args.keep
            done = sum(run_path(d, r).exists() for r in runs)
            if done:
                print(f"note: {done} of {len(runs)} runs are already in {d}; "
                      f"the wall time below covers only the other {len(runs) - done}")
            t0 = time.perf_counter()
            run_study(runs, d, workers=args.workers, weights_dir=d / "weights")
            wall = time.perf_counter() - t0
            same = sum(same_record(run_path(d, r), run_path(STUDY_DIR, r)) for r in runs)
        what = "the text study's first ten seeds" if args.text else "whole plan"
        print(f"measured: {what} in {wall:.0f} s ({wall / 60:.1f} min) with {args.workers} workers; "
              f"{same} of {len(runs)} run files identical to the committed ones (wall time aside)")


if __name__ == "__main__":
    main()
