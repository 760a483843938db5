"""The text study's pilot: how far apart do seeds put two arms, before the study runs?

Three pilot seeds (1000–1002, never seeds of the study) of the reference and two controls
at the full text budget: the reference's seed-to-seed spread of held-out loss, and the
spread of the paired differences (control − reference) that the study's tests will see.
The equivalence margin in `comparisons`' text endpoints is chosen from this and from the
published scale of the effects; the file written here is its record.

    python benchmarks/text_pilot.py --workers 2 --write   # artifacts/study/text_pilot.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from llamanat_core.paths import ROOT
from llamanat_core.study import STUDY_DIR, run_study
from llamanat_core.study.text_plan import text_run
from llamanat_core.util import atomic_write_text

OUT = STUDY_DIR / "text_pilot.json"
PILOT_SEEDS = (1000, 1001, 1002)
ARMS = ("llama", "layernorm", "gelu_mlp")


def pilot(workers: int, cache_dir: Path) -> dict:
    runs = [text_run(v, s) for v in ARMS for s in PILOT_SEEDS]
    entries = run_study(runs, cache_dir, workers)
    loss = {(r.variant, r.seed): entries[r.key]["endpoints"]["loss_end"] for r in runs}
    out = {"seeds": list(PILOT_SEEDS), "loss_end": {v: [loss[v, s] for s in PILOT_SEEDS] for v in ARMS},
           "seconds": {v: [entries[r.key]["seconds"] for r in runs if r.variant == v] for v in ARMS}}
    out["reference_sd"] = statistics.stdev(out["loss_end"]["llama"])
    out["differences"] = {v: [loss[v, s] - loss["llama", s] for s in PILOT_SEEDS] for v in ARMS[1:]}
    out["difference_sd"] = {v: statistics.stdev(d) for v, d in out["differences"].items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = pilot(args.workers, Path(scratch))
    for v, losses in out["loss_end"].items():
        print(f"{v:<10} " + "  ".join(f"{x:.4f}" for x in losses) + "  nats/char")
    print(f"reference seed sd {out['reference_sd']:.4f}")
    for v, d in out["differences"].items():
        print(f"{v:<10} − llama: " + "  ".join(f"{x:+.4f}" for x in d)
              + f"   sd {out['difference_sd'][v]:.4f}")
    if args.write:
        atomic_write_text(OUT, json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
