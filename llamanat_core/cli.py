"""`llamanat`: the command line (SPEC §9). Every subcommand has --help."""
from __future__ import annotations

import argparse
import sys


def _seeds(text: str) -> tuple[int, ...]:
    """'0-4' or '0,2,3' -> seeds."""
    try:
        if "-" in text:
            lo, hi = text.split("-", 1)
            seeds = tuple(range(int(lo), int(hi) + 1))
        else:
            seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like '0-4' or '0,2,3', got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be non-negative and non-empty, got {text!r}")
    return seeds


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def cmd_params(args) -> int:
    from . import EXPECTED_PARAMETERS, VARIANTS, TinyLlama, variant_config

    print(f"{'variant':<10} {'change':<28} {'parameters':>11}  groups")
    for name, change in VARIANTS.items():
        model = TinyLlama(variant_config(name), seed=None)
        n = model.num_parameters()
        assert n == EXPECTED_PARAMETERS[name], (name, n)
        groups = ", ".join(f"{k} {v:,}" for k, v in model.parameter_breakdown().items() if v)
        what = ", ".join(f"{k}={v}" for k, v in change.items()) or "reference"
        print(f"{name:<10} {what:<28} {n:>11,}  {groups}")
    return 0


def cmd_cache(args) -> int:
    from .probes.kvcache import arithmetic_table, human_bytes

    table = arithmetic_table(args.positions, args.batch, args.bytes)
    print(f"KV cache, K and V, batch {args.batch}, {args.bytes} bytes per value "
          f"(tiny model at {args.positions} positions, published models at their context)")
    print(f"{'model':<22} {'layers':>6} {'kv heads':>8} {'head_dim':>8} {'positions':>9} "
          f"{'bytes':>16}  size")
    for name, r in table.iterrows():
        print(f"{name:<22} {r.layers:>6} {r['KV heads']:>8} {r.head_dim:>8} {r.positions:>9} "
              f"{r.bytes:>16,}  {human_bytes(int(r.bytes))}")
    return 0


def cmd_fit(args) -> int:
    import torch
    from tqdm.auto import tqdm

    from . import variant_config
    from .train import Budget, TaskSpec, fit

    torch.set_num_threads(args.threads)
    overrides = {"rope_theta": args.rope_theta} if args.rope_theta is not None else {}
    cfg = variant_config(args.variant, **overrides)
    budget = Budget() if args.steps == Budget().steps else Budget.short(args.steps)
    spec = TaskSpec(args.task, args.pairs, args.answer, (8, 12) if args.task == "recall" else ())
    bar = tqdm(total=budget.steps, unit="step", file=sys.stderr, dynamic_ncols=True)

    def progress(step, loss):
        bar.update()
        if step % 25 == 0:
            bar.set_postfix(loss=f"{loss:.4f}")

    result = fit(cfg, spec, args.seed, budget, progress)
    bar.close()
    cols = [c for c in result.curve[0] if c != "step"]
    print(f"{args.variant} {args.task} seed={args.seed}: {result.model.num_parameters():,} parameters, "
          f"{result.seconds:.1f} s ({1000 * result.seconds / budget.steps:.1f} ms/step incl. scoring)")
    print(f"{'step':>6} " + " ".join(f"{c:>12}" for c in cols))
    for row in result.curve:
        print(f"{row['step']:>6} " + " ".join(
            f"{row[c]:>12.4f}" if row[c] is not None else f"{'-':>12}" for c in cols))
    return 0


def cmd_study(args) -> int:
    from pathlib import Path

    from .study import MEASUREMENTS, STUDY_DIR, WEIGHTS_DIR, plan, run_study, unique_runs, write_summary
    from .train import Budget

    if args.quick:
        budget, seeds = Budget.short(args.steps or 60), args.seeds or (0, 1)
        cache_dir = Path(args.cache_dir or ".quick")
    else:
        budget = Budget() if args.steps in (None, Budget().steps) else Budget.short(args.steps)
        seeds = args.seeds or (0, 1, 2, 3, 4)
        cache_dir = Path(args.cache_dir) if args.cache_dir else STUDY_DIR
        if cache_dir == STUDY_DIR and budget != Budget():
            print("study: a reduced --steps needs --quick or --cache-dir, so the committed "
                  "study only ever holds the full budget", file=sys.stderr)
            return 2
    only = tuple(args.only) if args.only else MEASUREMENTS + ("kv_cache",)
    if "kv_cache" in only and not args.list:
        _kv_timing(force="kv_cache" in (args.only or ()))
        only = tuple(m for m in only if m != "kv_cache")
        if not only:
            return 0
    p = plan(only, seeds, budget)
    runs = unique_runs(p)
    if args.list:
        for r in runs:
            print(r.key, r.label)
        return 0
    weights_dir = WEIGHTS_DIR if cache_dir == STUDY_DIR else cache_dir / "weights"
    entries = run_study(runs, cache_dir, args.workers, weights_dir=weights_dir)
    if set(only) == set(MEASUREMENTS):
        write_summary(p, entries, cache_dir)
        print(f"study: summary written to {cache_dir / 'results.csv'}", file=sys.stderr)
    return 0


def _kv_timing(force: bool) -> None:
    """The KV-cache timings (SPEC §7): measured once into a committed file, recording the machine."""
    from .probes.kvcache import TIMING_PATH, load_timing, measure_timing, write_timing

    if not force:
        try:
            load_timing()
            print(f"study: KV-cache timings present in {TIMING_PATH}", file=sys.stderr)
            return
        except (OSError, ValueError) as e:
            print(f"study: KV-cache timings need measuring ({e})", file=sys.stderr)
    print("study: measuring KV-cache timings (about 20 s)", file=sys.stderr)
    write_timing(measure_timing())


def cmd_chapters(args) -> int:
    from .chapters import run_chapters

    params = {}
    if args.seeds is not None:
        params["seeds"] = list(args.seeds)
    if args.steps is not None:
        params["steps"] = args.steps
    if args.fresh:
        params["fresh"] = True
    # The committed artifacts are what the book publishes: a run with other parameters
    # goes elsewhere unless asked, so a reader's experiment never dirties the tree.
    out = args.out or ("artifacts" if not params else ".fresh/chapters")
    run_chapters(args.names or None, params, out_dir=out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llamanat", description="LLaMA Anatomy: the tiny LLaMA, its controls, and the study.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("params", help="the parameter table of every variant (SPEC §4)",
                       description="Print each variant, the field it changes and its exact parameter count.")
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("cache", help="KV-cache arithmetic (SPEC §7), no training",
                       description="Exact KV-cache bytes for the tiny model's MHA/GQA/MQA and for LLaMA-1 "
                                   "7B-65B and Llama-2-70B at their context lengths.")
    p.add_argument("--positions", type=_positive, default=2048, help="positions for the tiny model (2048)")
    p.add_argument("--batch", type=_positive, default=1, help="batch size (1)")
    p.add_argument("--bytes", type=_positive, default=2, help="bytes per value (2 = fp16)")
    p.set_defaults(func=cmd_cache)

    from .config import VARIANTS
    p = sub.add_parser("fit", help="train one model under the budget and print its curve",
                       description="Train one variant on one task (SPEC §6) and print the checkpoint curve.")
    p.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    p.add_argument("--task", required=True, choices=("addition", "recall"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=_positive, default=1200, help="training steps (1200)")
    p.add_argument("--pairs", type=_positive, default=4, help="recall pairs at training (4)")
    p.add_argument("--answer", choices=("name", "copy"), default="name", help="recall answer formulation")
    p.add_argument("--rope-theta", type=float, default=None, help="override the RoPE base")
    p.add_argument("--threads", type=_positive, default=1, help="torch threads (1, as the study)")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("study", help="run the measurement plan (resumable, parallel)",
                       description="Run every run of the plan not already cached; killing it loses at most "
                                   "the runs in flight.")
    p.add_argument("--only", nargs="+", choices=("matrix", "length", "sweep", "alphabet", "kv_cache"),
                   help="only these measurements (kv_cache re-measures the timings)")
    p.add_argument("--seeds", type=_seeds, default=None, help="e.g. 0-4 or 0,2 (default 0-4)")
    p.add_argument("--workers", type=_positive, default=1, help="worker processes, one thread each")
    p.add_argument("--quick", action="store_true", help="tiny budget (60 steps, seeds 0-1) into .quick/")
    p.add_argument("--steps", type=_positive, default=None, help="steps (with --quick or --cache-dir)")
    p.add_argument("--cache-dir", default=None, help="where run files go (default artifacts/study)")
    p.add_argument("--list", action="store_true", help="list the runs and their keys, run nothing")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("chapters", help="execute chapters with papermill into artifacts/",
                       description="Execute chapters/NAME.ipynb into artifacts/NAME.ipynb (all by default).")
    p.add_argument("names", nargs="*", help="chapter names (default: all, in book order)")
    p.add_argument("--seeds", type=_seeds, default=None, help="papermill parameter `seeds`")
    p.add_argument("--steps", type=_positive, default=None, help="papermill parameter `steps`")
    p.add_argument("--fresh", action="store_true", help="re-train the chapter's runs here")
    p.add_argument("--out", default=None,
                   help="output folder (default artifacts/, or .fresh/chapters/ with parameters)")
    p.set_defaults(func=cmd_chapters)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .chapters import ChapterError

    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ChapterError) as e:
        print(f"llamanat {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
