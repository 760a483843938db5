"""Wall time of the whole study plan, measured, with the worker count.

    python benchmarks/study_plan.py                # read the committed run files
    python benchmarks/study_plan.py --run -w 2     # run the whole plan into a temp dir

By default it reports what the committed runs recorded (seconds per run, compile
included) and the wall time that implies for N workers. With --run it trains the
whole plan from scratch into a temporary cache, measures the wall time, and checks
that every run file equals the committed one (a full reproduction, ~8-9 minutes at
2 workers on a 2-core machine).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from llamanat_core.study import STUDY_DIR, check_entry, plan, run_path, run_study, unique_runs


def recorded(runs) -> list[float]:
    out = []
    for r in runs:
        entry, why = check_entry(run_path(STUDY_DIR, r))
        if entry is None:
            raise SystemExit(f"committed run {r.label} is {why}; run `llamanat study` first")
        out.append(entry["seconds"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="store_true", help="train the whole plan into a temp dir")
    ap.add_argument("-w", "--workers", type=int, default=2)
    args = ap.parse_args()
    runs = unique_runs(plan())
    secs = recorded(runs)
    print(f"plan: {len(runs)} runs of 1,200 steps (5 seeds)")
    print(f"committed runs: {sum(secs):.0f} s of run time in all, median {statistics.median(secs):.1f} s "
          f"per run (fit incl. compile and checkpoint scoring) -> {sum(secs) / args.workers / 60:.1f} min "
          f"at {args.workers} workers if perfectly packed")
    if not args.run:
        return
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        run_study(runs, Path(d), workers=args.workers, weights_dir=Path(d) / "weights")
        wall = time.perf_counter() - t0
        same = sum(
            {k: v for k, v in json.loads(run_path(Path(d), r).read_text()).items() if k != "seconds"}
            == {k: v for k, v in json.loads(run_path(STUDY_DIR, r).read_text()).items() if k != "seconds"}
            for r in runs)
    print(f"measured: whole plan in {wall:.0f} s ({wall / 60:.1f} min) with {args.workers} workers; "
          f"{same} of {len(runs)} run files identical to the committed ones (wall time aside)")


if __name__ == "__main__":
    main()
