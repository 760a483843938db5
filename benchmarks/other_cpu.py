"""The study re-made on another CPU: which runs solve, and which decisions hold.

    python benchmarks/study_plan.py --run -w 2 --keep DIR   # re-make the plan into DIR
    python benchmarks/other_cpu.py DIR                      # compare DIR with the committed study

Another CPU rounds differently from the first step (`llamanat verify` checks that the
difference stays rounding-sized early on); after a few hundred steps two such runs are
different trajectories from the same seed, data and code. Whether a seed escapes its
plateau can then differ, and with it a time to solve. This compares, run for run, whether
each solved and when, and then every decision of `comparisons.decide` (paired exact
sign-flip tests; on the first ten seeds, the stage-1 rule): a decision that flips between
two CPUs rests on rounding, not on the mechanism.
"""
from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

from llamanat_core.analysis import comparisons
from llamanat_core.study import STUDY_DIR, committed_entries, plan, unique_runs
from llamanat_core.study.results import frame


def entries_of(cache_dir: Path, runs) -> dict[str, dict]:
    try:
        return committed_entries(cache_dir, runs)
    except ValueError as e:
        raise SystemExit(f"{e}; finish them with `python benchmarks/study_plan.py --run "
                         f"--keep {cache_dir}`") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("other", type=Path, help="a study folder made by study_plan.py --run --keep")
    ap.add_argument("--against", type=Path, default=STUDY_DIR, help="the study to compare with "
                    "(default: the committed one)")
    args = ap.parse_args()
    p = plan()
    runs = unique_runs(p)
    ours, theirs = entries_of(args.against, runs), entries_of(args.other, runs)
    cpu = lambda es: ", ".join(sorted({e["env"]["cpu"] for e in es.values()}))  # noqa: E731
    print(f"committed: {cpu(ours)}\nother:     {cpu(theirs)}")

    same_file = sum(ours[k]["dense"] == theirs[k]["dense"] for k in ours)
    solved = Counter((ours[k]["solve_step"] is not None, theirs[k]["solve_step"] is not None) for k in ours)
    both = [(ours[k]["solve_step"], theirs[k]["solve_step"]) for k in ours
            if ours[k]["solve_step"] is not None and theirs[k]["solve_step"] is not None]
    gaps = [abs(a - b) for a, b in both]
    print(f"\nruns: {len(runs)}; dense curves identical in {same_file}")
    print(f"  solved on both CPUs {solved[True, True]}, on neither {solved[False, False]}, "
          f"only committed {solved[True, False]}, only other {solved[False, True]}")
    if gaps:
        print(f"  solved on both: same solve step in {sum(g == 0 for g in gaps)} of {len(gaps)}, "
              f"median |difference| {statistics.median(gaps):.0f} steps, largest {max(gaps)}")
    by_row = Counter()
    for r in runs:
        a, b = ours[r.key]["solve_step"] is not None, theirs[r.key]["solve_step"] is not None
        by_row[(r.task, r.regime), a == b] += 1
    for task, regime in sorted({k[0] for k in by_row}):
        agree, differ = by_row[(task, regime), True], by_row[(task, regime), False]
        print(f"  {task:8s} {regime:6s}: solved-or-not agrees in {agree} of {agree + differ} runs")

    fa, fb = frame(p, ours), frame(p, theirs)
    compare_verdicts("decisions on seeds 0-9 (paired exact tests; the stage-1 rule)",
                     comparisons.decide(fa), comparisons.decide(fb))


def compare_verdicts(title: str, va, vb) -> None:
    key = ["measurement", "comparison", "task", "regime", "metric"]
    m = va.merge(vb, on=key, suffixes=("_committed", "_other"))
    flips = m[m.verdict_committed != m.verdict_other]
    print(f"\n{title}: {len(m)} comparisons; the same verdict on both CPUs in {len(m) - len(flips)}")
    for name, v in (("committed", va), ("other", vb)):
        counts = v.groupby(["regime", "verdict"]).size()
        print(f"  {name:9s} " + "; ".join(f"{reg} {verd} {n}" for (reg, verd), n in counts.items()))
    if "stopped" in m:
        moved = m[m.stopped_committed != m.stopped_other]
        print(f"  the stage-1 rule decides alike on {len(m) - len(moved)} of {len(m)}")
    if len(flips):
        print("  comparisons whose verdict differs (Holm p committed -> other):")
        for r in flips.itertuples():
            print(f"  {r.comparison:28s} {r.task:8s} {r.regime:6s} {r.metric:18s} "
                  f"{r.verdict_committed} -> {r.verdict_other}  "
                  f"(p {r.p_holm_committed:.3g} -> {r.p_holm_other:.3g})")

if __name__ == "__main__":
    main()
