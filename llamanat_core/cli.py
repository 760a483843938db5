"""`llamanat`: the command line. Every subcommand has --help."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from .chapters import ChapterError, run_chapters
from .config import EXPECTED_PARAMETERS, REGIMES, VARIANTS, variant_config
from .model import TinyLlama
from .paths import ARTIFACTS_DIR, FRESH_CHAPTERS_DIR, KV_TEXT_TIMING_PATH, KV_TIMING_PATH, ROOT
from .probes.kv_cache_chapter import arithmetic_table, human_bytes, measure_text_timing, measure_timing
from .study import (
    MEASUREMENTS,
    SEEDS,
    STUDY_DIR,
    plan,
    run_study,
    study_settings,
    unique_runs,
    write_summary,
    write_text_summary,
)
from .study.executors import check_ray
from .study.kv_timing import TEXT_TIMING_FIELDS, ensure_timing
from .study.text_plan import LR_SEEDS, TEXT_MEASUREMENTS
from .study.verify import TOLERANCE, VERIFY_STEPS, describe, verify
from .text import VOCAB_SIZE, load_corpus
from .text_train import TEXT_ENDPOINTS, TextBudget, fit_text
from .train import Budget, TaskSpec, fit
from .two_stage import study_plan, text_study_plan
from .util import WriteError


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
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must not repeat, got {text!r}")
    return seeds


def _whole_number(minimum: int, expected: str):
    """An argparse type: an integer >= `minimum`, else the error 'expected <expected>'."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_seed = _whole_number(0, "a non-negative integer seed")
_positive = _whole_number(1, "a positive integer")


def cmd_params(args) -> int:

    print(f"{'variant':<10} {'change':<28} {'parameters':>11}  groups")
    for name, change in VARIANTS.items():
        model = TinyLlama(variant_config(name), seed=None)
        n = model.num_parameters()
        if name in EXPECTED_PARAMETERS and n != EXPECTED_PARAMETERS[name]:
            raise ValueError(f"variant {name!r} has {n:,} parameters, registered as "
                             f"{EXPECTED_PARAMETERS[name]:,}")
        groups = ", ".join(f"{k} {v:,}" for k, v in model.parameter_breakdown().items() if v)
        what = ", ".join(f"{k}={v}" for k, v in change.items()) or "reference"
        print(f"{name:<10} {what:<28} {n:>11,}  {groups}")
    return 0


def cmd_cache(args) -> int:

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
    from tqdm.auto import tqdm  # the progress bar: only when a model trains


    torch.set_num_threads(args.threads)
    overrides = {"rope_theta": args.rope_theta} if args.rope_theta is not None else {}
    if args.task == "text":
        return _fit_text(args, overrides)
    cfg = variant_config(args.variant, **overrides)
    budget = Budget.for_steps(args.steps, args.regime)
    spec = TaskSpec(args.task, args.pairs, args.answer, (8, 12) if args.task == "recall" else ())
    bar = tqdm(total=budget.steps, unit="step", file=sys.stderr, dynamic_ncols=True)

    def progress(step, loss):
        bar.update()
        if step % 25 == 0:
            bar.set_postfix(loss=f"{loss:.4f}")

    result = fit(cfg, spec, args.seed, budget, progress)
    bar.close()
    cols = [c for c in result.test_curve[0] if c != "step"]
    solved = (f"solved at step {result.solve_step:,}" if result.solve_step is not None
              else f"not solved (validation accuracy >= {budget.solve_at:.0%})")
    print(f"{args.variant} {args.task} {args.regime} seed={args.seed}: "
          f"{result.model.num_parameters():,} parameters, {solved}, stopped at {result.stop_step:,}, "
          f"{result.seconds:.1f} s ({1000 * result.seconds / result.stop_step:.1f} ms/step incl. scoring)")
    print(f"{'step':>6} " + " ".join(f"{c:>12}" for c in cols))
    for row in result.test_curve:
        print(f"{row['step']:>6} " + " ".join(
            f"{row[c]:>12.4f}" if row[c] is not None else f"{'-':>12}" for c in cols))
    return 0


def _fit_text(args, overrides: dict) -> int:
    """`llamanat fit --task text`: one text run, its validation curve and endpoints."""
    from tqdm.auto import tqdm  # the progress bar: only when a model trains


    cfg = variant_config(args.variant, vocab_size=VOCAB_SIZE, **overrides)
    budget = TextBudget.for_steps(args.steps, args.lr_scale)
    corpus = load_corpus()
    bar = tqdm(total=budget.steps, unit="step", file=sys.stderr, dynamic_ncols=True)

    def progress(step, loss):
        bar.update()
        if step % 25 == 0:
            bar.set_postfix(loss=f"{loss:.4f}")

    result = fit_text(cfg, args.seed, budget, corpus, progress)
    bar.close()
    print(f"{args.variant} text seed={args.seed}: {result.model.num_parameters():,} parameters, "
          f"{budget.steps:,} steps of {budget.batch_size} windows of {budget.context} characters, "
          f"{result.seconds:.1f} s")
    print(f"{'step':>6} {'train loss':>11} {'val loss':>9}")
    for row in result.val_curve:
        print(f"{row['step']:>6} {row['train_loss']:>11.4f} {row['val_loss']:>9.4f}")
    for name, what in TEXT_ENDPOINTS.items():
        v = result.endpoints[name]
        value = "not defined" if math.isnan(v) else f"{v:.4f} nats = {v / math.log(2):.4f} bits per character"
        print(f"{name:<10} {value}  ({what})")
    return 0


def cmd_study(args) -> int:

    settings = study_settings(args.quick, args.steps, args.seeds, args.cache_dir, args.list)
    only = tuple(args.only) if args.only else MEASUREMENTS + ("kv_cache",) + TEXT_MEASUREMENTS
    texts = tuple(m for m in only if m in TEXT_MEASUREMENTS)
    measurements = tuple(m for m in only if m != "kv_cache" and m not in texts)
    options = _executor_options(args, measurements + texts)
    # The whole study is the first ten seeds of every row plus the seeds the stage-1 rule adds
    whole = set(measurements) == set(MEASUREMENTS) and settings.seeds == SEEDS and not args.quick
    if args.added_seeds and not whole and (measurements or args.seeds or args.quick):
        raise ValueError("--added-seeds extends the whole study, or the text study alone "
                         "(--only text): no other --only, no --seeds or --quick")
    if whole:
        p = study_plan(settings.cache_dir, settings.budget, settings.compile, train_added=args.added_seeds)
    else:
        p = plan(measurements, settings.seeds, settings.budget, settings.compile) if measurements else {}
    text = _text_plan(texts, settings, args.added_seeds) if texts else {}
    if args.list:
        for r in (unique_runs(p) if measurements else []) + (unique_runs(text) if texts else []):
            print(r.key, r.label)
        if "kv_cache" in only:
            print(f"kv_cache: KV-cache timings, measured into {KV_TIMING_PATH.relative_to(ROOT)} and "
                  f"{KV_TEXT_TIMING_PATH.relative_to(ROOT)}")
        return 0
    if "kv_cache" in only:
        ensure_timing(measure_timing, force="kv_cache" in (args.only or ()))
    if texts:
        _run_text(text, settings, args, options)
    if "kv_cache" in only:  # after the text runs: it generates with the trained text reference
        try:
            ensure_timing(measure_text_timing, force="kv_cache" in (args.only or ()),
                          path=KV_TEXT_TIMING_PATH, fields=TEXT_TIMING_FIELDS)
        except FileNotFoundError as e:
            print(f"study: the text generation timing waits for its model ({e})", file=sys.stderr)
    if not measurements:
        return 0
    entries = run_study(unique_runs(p), settings.cache_dir, args.workers, weights_dir=settings.weights_dir,
                        executor=args.executor, interleave=not args.added_seeds, **options)
    if set(measurements) == set(MEASUREMENTS):
        write_summary(p, entries, settings.cache_dir)
        print(f"study: summary written to {settings.cache_dir / 'results.csv'} and "
              f"{settings.cache_dir / 'curves.csv'}", file=sys.stderr)
    return 0


def _text_plan(texts, settings, added: bool) -> dict:
    """The text measurements at the study's settings: the full budget, or the cap of
    --steps/--quick; --seeds picks the seeds (the learning-rate check keeps those of 0–2).
    Seeds 10–39 of the rows stage one leaves undecided are trained with `added`, and
    otherwise kept in the summary where they are cached (`two_stage.text_study_plan`)."""
    steps = None if settings.budget == Budget() else settings.budget.steps
    lr_seeds = tuple(s for s in settings.seeds if s in LR_SEEDS) or settings.seeds[:1]
    return text_study_plan(settings.cache_dir, texts, settings.seeds, steps, lr_seeds, train_added=added)


def _run_text(text: dict, settings, args, options) -> None:

    entries = run_study(unique_runs(text), settings.cache_dir, args.workers,
                        weights_dir=settings.weights_dir, executor=args.executor, **options)
    write_text_summary(text, entries, settings.cache_dir)
    print(f"study: text summary written to {settings.cache_dir / 'text_results.csv'}", file=sys.stderr)


def _executor_options(args, measurements) -> dict:
    """--executor ray's options, after checking (before any work) that Ray imports and the
    head at --address answers; --address without --executor ray is an error."""
    if args.address is not None and args.executor != "ray":
        raise ValueError("--address names a Ray cluster; add --executor ray")
    if args.executor != "ray" or args.list or not measurements:
        return {}

    check_ray(args.address)
    return {"address": args.address}


def cmd_verify(args) -> int:


    cache_dir = Path(args.cache_dir) if args.cache_dir else STUDY_DIR
    print(f"verify: re-fitting the first {VERIFY_STEPS} steps of committed runs (plain loop, "
          f"1 thread); tolerance {TOLERANCE:.0e} on every step's training loss", file=sys.stderr)
    checks = verify(cache_dir, args.sample, args.runs, progress=lambda c: print(describe(c), flush=True))
    bad = [c for c in checks if not c.ok]
    if bad:
        print(f"verify: {len(bad)} of {len(checks)} runs differ from the code: "
              + ", ".join(c.label for c in bad), file=sys.stderr)
        return 1
    print(f"verify: all {len(checks)} runs match the code", file=sys.stderr)
    return 0


def cmd_chapters(args) -> int:

    params = {}
    if args.seeds is not None:
        params["seeds"] = list(args.seeds)
    if args.steps is not None:
        params["steps"] = args.steps
    if args.fresh:
        params["fresh"] = True
    # The committed artifacts are what the book publishes: a run with other parameters
    # goes elsewhere unless asked, so a reader's experiment never dirties the tree.
    out = args.out or (ARTIFACTS_DIR if not params else FRESH_CHAPTERS_DIR)
    run_chapters(args.names or None, params, out_dir=out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `llamanat` parser: one subcommand per `_add_NAME` below, each with --help."""
    parser = argparse.ArgumentParser(
        prog="llamanat", description="LLaMA Anatomy: the tiny LLaMA, its controls, and the study.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_params, _add_cache, _add_fit, _add_study, _add_verify, _add_chapters):
        add(sub)
    return parser


def _add_params(sub) -> None:
    p = sub.add_parser("params", help="the parameter table of every variant",
                       description="Print each variant, the field it changes and its exact parameter count.")
    p.set_defaults(func=cmd_params)


def _add_cache(sub) -> None:
    p = sub.add_parser("cache", help="KV-cache arithmetic, no training",
                       description="Exact KV-cache bytes for the tiny model's MHA/GQA/MQA and for LLaMA-1 "
                                   "7B-65B and Llama-2-70B at their context lengths.")
    p.add_argument("--positions", type=_positive, default=2048, help="positions for the tiny model (2048)")
    p.add_argument("--batch", type=_positive, default=1, help="batch size (1)")
    p.add_argument("--bytes", type=_positive, default=2, help="bytes per value (2 = fp16)")
    p.set_defaults(func=cmd_cache)


def _add_fit(sub) -> None:

    p = sub.add_parser("fit", help="train one model under the budget and print its curve",
                       description="Train one variant on one task under the study's budget and print "
                                   "the test checkpoints (1,200 steps at least, then until solved "
                                   "or the cap).")
    p.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    p.add_argument("--task", required=True, choices=("addition", "recall", "text"),
                   help="text: next-character loss on the Austen novels (make corpus first)")
    p.add_argument("--seed", type=_seed, default=0, help="a non-negative integer (0)")
    p.add_argument("--steps", type=_positive, default=None, help="the cap of training steps (4800)")
    p.add_argument("--regime", choices=REGIMES, default="finite",
                   help="finite: 4,000 training items reused; fresh: every batch new items")
    p.add_argument("--pairs", type=_positive, default=4, help="recall pairs at training (4)")
    p.add_argument("--answer", choices=("name", "copy"), default="name", help="recall answer formulation")
    p.add_argument("--rope-theta", type=float, default=None, help="override the RoPE base")
    p.add_argument("--lr-scale", type=float, default=1.0,
                   help="text only: multiply the peak learning rate (1)")
    p.add_argument("--threads", type=_positive, default=1, help="torch threads (1, as the study)")
    p.set_defaults(func=cmd_fit)


def _add_study(sub) -> None:
    p = sub.add_parser("study", help="run the measurement plan (resumable, parallel)",
                       description="Run every run of the plan not already cached. Stop it with Ctrl-C or "
                                   "SIGTERM: the runs in flight are dropped, its workers end, every stored "
                                   "run is kept, and the same command resumes. One study at a time per "
                                   "cache folder (a lock file there names the running one). Runs train "
                                   "in a local process pool, or as Ray tasks (--executor ray) on this "
                                   "machine or a cluster; either way this process writes every run file.")
    p.add_argument("--only", nargs="+",
                   choices=("matrix", "length", "sweep", "alphabet", "kv_cache", "text", "text_lr"),
                   help="only these measurements (default: all; kv_cache re-measures the timings; "
                        "text and text_lr are the text study and its learning-rate check)")
    p.add_argument("--seeds", type=_seeds, default=None, help="e.g. 0-9 or 0,2 (default 0-9)")
    p.add_argument("--workers", type=_positive, default=1,
                   help="worker processes, one thread each (with --executor ray and no --address: "
                        "the CPUs of the Ray instance started here)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: a process pool on this machine (default, starts nothing); "
                        "ray: one Ray task per run, on a Ray instance started here or the "
                        "cluster at --address")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="the head of a running Ray cluster (`ray start --head` prints it); "
                        "with --executor ray")
    p.add_argument("--quick", action="store_true", help="tiny budget (60 steps, seeds 0-1) into .quick/")
    p.add_argument("--steps", type=_positive, default=None,
                   help="the cap of steps (with --quick or --cache-dir)")
    p.add_argument("--cache-dir", default=None, help="where run files go (default artifacts/study)")
    p.add_argument("--list", action="store_true", help="list the runs and their keys, run nothing")
    p.add_argument("--added-seeds", action="store_true",
                   help="also train the seeds 10-39 that the stage-1 rule adds to comparisons left "
                        "undecided by seeds 0-9 (hours; resumable)")
    p.set_defaults(func=cmd_study)


def _add_verify(sub) -> None:
    p = sub.add_parser("verify", help="check committed runs against this code on this CPU",
                       description="Re-fit the first 50 steps of a sample of committed runs with the plain "
                                   "training loop and compare every step's loss with the committed one. "
                                   "Exit 1 naming the runs that differ.")
    p.add_argument("--sample", type=_positive, default=8, help="how many runs, spread over the plan (8)")
    p.add_argument("--runs", nargs="+", default=None, metavar="KEY", help="these run keys instead")
    p.add_argument("--cache-dir", default=None, help="the study to check (default artifacts/study)")
    p.set_defaults(func=cmd_verify)


def _add_chapters(sub) -> None:
    p = sub.add_parser("chapters", help="execute chapters with papermill into artifacts/",
                       description="Execute chapters/NAME.md into artifacts/NAME.ipynb (all by default).")
    p.add_argument("names", nargs="*", help="chapter names (default: all, in book order)")
    p.add_argument("--seeds", type=_seeds, default=None, help="papermill parameter `seeds`")
    p.add_argument("--steps", type=_positive, default=None, help="papermill parameter `steps`")
    p.add_argument("--fresh", action="store_true", help="re-train the chapter's runs here")
    p.add_argument("--out", default=None,
                   help="output folder (default artifacts/, or .fresh/chapters/ with parameters)")
    p.set_defaults(func=cmd_chapters)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, WriteError, ChapterError) as e:
        print(f"llamanat {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # the study has said what it kept; no traceback
        return 128 + getattr(e, "signum", 2)  # the shell's code for death by that signal


if __name__ == "__main__":
    sys.exit(main())
