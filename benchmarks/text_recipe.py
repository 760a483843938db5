"""The text recipe's pilot: how many tokens, before the tuned study runs?

The tuned text study needs a budget long enough that the reference, at its best rate,
beats the counted 4-gram baseline on the validation half and has stopped improving much:
its validation loss falls by less than `MAX_LAST_QUARTER_GAIN` over the last quarter of
its steps. This pilot trains the reference (S, the recipe's weight decay on matrices
only, the compiled step) on one pilot seed, never a seed of the study, at a few token
budgets and peak rates, and picks the smallest budget that passes both checks at its best
rate. Selection reads the validation half only; the test half is not touched.

    python benchmarks/text_recipe.py --workers 2 --write   # artifacts/study/text_recipe_pilot.json

The file it writes is the record the recipe in `study/text_recipe.py` cites.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from llamanat_core.data.ngram import load_ngram_baselines
from llamanat_core.data.text import VOCAB_SIZE, load_corpus
from llamanat_core.model.config import variant_config
from llamanat_core.paths import STUDY_DIR
from llamanat_core.train.text import TextBudget, fit_text, held_out_loss
from llamanat_core.util import atomic_write_text, torch_threads

OUT = STUDY_DIR / "text_recipe_pilot.json"
PILOT_SEED = 1000  # outside the study's seeds
GRID = [(1600, 4.0), (1600, 8.0), (2400, 2.0), (2400, 4.0), (2400, 8.0), (3200, 4.0), (3200, 8.0)]
MAX_LAST_QUARTER_GAIN = 0.02  # relative fall of the validation loss over the last quarter
WARMUP_SHARE = 0.05  # the first text study's 40 of 800 steps


def pilot_budget(steps: int, lr_scale: float) -> TextBudget:
    """The recipe at `steps`: weight decay on matrices, warm-up a fixed share of the steps."""
    return replace(TextBudget(), steps=steps, warmup=round(WARMUP_SHARE * steps),
                   lr=TextBudget().lr * lr_scale, decay="matrices")


def one_run(job: tuple[int, float]) -> dict:
    steps, scale = job
    with torch_threads(1):
        corpus = load_corpus()
        cfg = variant_config("llama", vocab_size=VOCAB_SIZE)
        t0 = time.perf_counter()
        res = fit_text(cfg, PILOT_SEED, pilot_budget(steps, scale), corpus, compile=True)
        seconds = time.perf_counter() - t0
        val = held_out_loss(res.model, corpus.val, 48)  # the whole validation half
    curve = {row["step"]: row["val_loss"] for row in res.val_curve}
    quarter = max(s for s in curve if s <= 3 * steps // 4)
    return {"steps": steps, "lr_scale": scale, "val_loss": val, "seconds": round(seconds, 1),
            "curve_val_at_three_quarters": curve[quarter], "curve_val_at_end": curve[steps],
            "last_quarter_gain": (curve[quarter] - curve[steps]) / curve[quarter],
            "tokens": steps * TextBudget().batch_size * TextBudget().context}


def choose(runs: list[dict], four_gram_val: float) -> dict:
    """Per budget, the best rate on validation; the smallest budget whose best run beats
    the 4-gram and gains less than the threshold over its last quarter (None if none)."""
    best = {}
    for r in runs:
        if r["steps"] not in best or r["val_loss"] < best[r["steps"]]["val_loss"]:
            best[r["steps"]] = r
    passing = [s for s, r in sorted(best.items())
               if r["val_loss"] < four_gram_val and r["last_quarter_gain"] < MAX_LAST_QUARTER_GAIN]
    return {"best_per_budget": {str(s): r["lr_scale"] for s, r in sorted(best.items())},
            "chosen_steps": passing[0] if passing else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", action="store_true", help="write artifacts/study/text_recipe_pilot.json")
    args = ap.parse_args()
    four_gram = load_ngram_baselines()["witten_bell"]["4"]["val"]["nats"]
    with ProcessPoolExecutor(args.workers) as pool:
        runs = sorted(pool.map(one_run, GRID), key=lambda r: (r["steps"], r["lr_scale"]))
    for r in runs:
        print(f"{r['steps']:5d} steps  lr x{r['lr_scale']:g}  val {r['val_loss']:.4f} nats "
              f"({r['val_loss'] / math.log(2):.3f} bits)  last-quarter gain {r['last_quarter_gain']:.2%}"
              f"  {r['seconds']:.0f} s")
    out = {"seed": PILOT_SEED, "four_gram_val_nats": four_gram, "runs": runs,
           "max_last_quarter_gain": MAX_LAST_QUARTER_GAIN, "warmup_share": WARMUP_SHARE,
           **choose(runs, four_gram)}
    print(f"4-gram (Witten-Bell) on validation: {four_gram:.4f} nats; chosen: {out['chosen_steps']} steps")
    if args.write:
        atomic_write_text(OUT, json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
