"""Runs per minute through each executor, side by side, on one fixed small plan.

    python benchmarks/executor_throughput.py                  # local x1, local x2, ray x2
    python benchmarks/executor_throughput.py --steps 300      # longer runs: start-up matters less

Each executor trains the same plan (the rotation sweep at seeds 0-1: 8 runs, eager, a
cap of --steps) into its own temporary cache, from cold: the Ray column includes
starting a local Ray instance. The table gives runs per minute and the speed-up over
one local worker; below it, what the full plan would take on N nodes of C CPUs,
scaling the committed runs' recorded seconds by the measured per-CPU efficiency of Ray.
Measure on a quiet machine: anything else running shares the cores.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from llamanat_core.study import STUDY_DIR, committed_entries, plan, run_study, unique_runs
from llamanat_core.train.loop import Budget

CONFIGS = (("local", 1), ("local", 2), ("ray", 2))


def small_plan(steps: int):
    return unique_runs(plan(("sweep",), seeds=(0, 1), budget=Budget.for_steps(steps), compile=False))


def measure(executor: str, workers: int, runs) -> float:
    """Wall seconds for `runs` through `executor` into a fresh cache."""
    with tempfile.TemporaryDirectory(prefix="llx", dir="/tmp") as d:
        options = {"temp_dir": Path(d, "r")} if executor == "ray" else {}
        t0 = time.perf_counter()
        run_study(runs, Path(d), workers=workers, weights_dir=Path(d, "weights"), progress=False,
                  executor=executor, **options)
        return time.perf_counter() - t0


def committed_seconds() -> list[float] | None:
    try:
        return [e["seconds"] for e in committed_entries(STUDY_DIR, unique_runs(plan())).values()]
    except ValueError:  # no committed study here
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100, help="cap of steps per run (100)")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8], help="node counts to project")
    ap.add_argument("--cpus", type=int, default=os.cpu_count(), help="CPUs per node (this machine's)")
    args = ap.parse_args()
    runs = small_plan(args.steps)
    load = os.getloadavg()[0]
    print(f"plan: {len(runs)} runs (rotation sweep, seeds 0-1, eager, {args.steps} steps); "
          f"{os.cpu_count()} CPUs here, load average {load:.1f} at the start")
    if load > 0.5:
        print("warning: this machine is not quiet; the numbers below share its cores")
    rates = {}
    print(f"{'executor':<10} {'workers':>7} {'wall s':>8} {'runs/min':>9} {'speed-up':>9}")
    for executor, workers in CONFIGS:
        wall = measure(executor, workers, runs)
        rates[executor, workers] = 60 * len(runs) / wall
        up = rates[executor, workers] / rates["local", 1]
        print(f"{executor:<10} {workers:>7} {wall:>8.1f} {rates[executor, workers]:>9.1f} {up:>8.2f}x")
    efficiency = rates["ray", 2] / (2 * rates["local", 1])  # per CPU, against one local worker
    secs = committed_seconds()
    if secs is None:  # no committed study here: project at the small plan's run length
        full = len(unique_runs(plan()))
        per_cpu = rates["ray", 2] / 2
        print(f"\nfull plan: {full} runs; no committed run files here to read their length from, "
              f"so at this plan's run length ({args.steps} steps) and Ray's {per_cpu:.1f} runs/min per CPU:")
        print(f"{'nodes':>5} {'CPUs':>5} {'minutes':>8}")
        for n in args.nodes:
            print(f"{n:>5} {n * args.cpus:>5} {full / per_cpu / (n * args.cpus):>8.1f}")
        return
    print(f"\nfull plan: {len(secs)} runs, {sum(secs) / 60:.0f} CPU-minutes recorded by the "
          f"committed runs (longest {max(secs):.0f} s); Ray ran at {efficiency:.0%} of a local "
          f"worker per CPU on the small plan")
    print(f"{'nodes':>5} {'CPUs':>5} {'minutes':>8}   (CPU-minutes / CPUs / efficiency, "
          f"at least the longest run)")
    for n in args.nodes:
        cpus = n * args.cpus
        minutes = max(sum(secs) / cpus / efficiency, max(secs)) / 60
        print(f"{n:>5} {cpus:>5} {minutes:>8.1f}")


if __name__ == "__main__":
    main()
