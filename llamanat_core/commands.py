"""The bodies of `llamanat`'s subcommands, one `cmd_NAME(args)` each (`COMMANDS`). The
parser and its checks are in `cli.py`, which loads this module (torch, pandas, the study)
only once the arguments parse."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from .analysis.two_stage import study_plan, text_study_plan, tuned_study_plan
from .book.execute import ChapterError, run_chapters
from .book.helpers.kv_cache import arithmetic_table, human_bytes, measure_text_timing, measure_timing
from .data.tasks import TRAIN_PAIRS
from .data.text import VOCAB_SIZE, load_corpus
from .model.config import EXPECTED_PARAMETERS, VARIANTS, size_config, variant_changes, variant_config
from .model.model import TinyLlama
from .paths import ARTIFACTS_DIR, FRESH_CHAPTERS_DIR, KV_TEXT_TIMING_PATH, KV_TIMING_PATH, ROOT
from .study import (
    EXTRAPOLATE,
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
from .study.text_recipe import recipe_budget, run_tuned, stored_in, time_left
from .study.verify import TOLERANCE, VERIFY_LR_SUM, VERIFY_STEPS, describe, verify
from .train.compiled import compile_default
from .train.loop import Budget, TaskSpec, fit
from .train.text import SELECTION, TEXT_ENDPOINTS, TextBudget, fit_text
from .util import WriteError


def cmd_params(args) -> int:
    size = getattr(args, "size", "S")
    print(f"{'variant':<12} {'change':<28} {'parameters':>11}  groups")
    for name in VARIANTS:
        cfg = variant_config(name, size=size)
        change = variant_changes(VARIANTS[name], size_config(size))
        model = TinyLlama(cfg, seed=None)
        n = model.num_parameters()
        if size == "S" and name in EXPECTED_PARAMETERS and n != EXPECTED_PARAMETERS[name]:
            raise ValueError(f"variant {name!r} has {n:,} parameters, registered as "
                             f"{EXPECTED_PARAMETERS[name]:,}")
        groups = ", ".join(f"{k} {v:,}" for k, v in model.parameter_breakdown().items() if v)
        what = ", ".join(f"{k}={v}" for k, v in change.items()) or "reference"
        print(f"{name:<12} {what:<28} {n:>11,}  {groups}")
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
    if args.size != "S" or args.recipe != "tuned":
        raise ValueError("--size and --recipe apply to --task text only")
    cfg = variant_config(args.variant, **overrides)
    budget = Budget.for_steps(args.steps, args.regime)
    pairs = TRAIN_PAIRS if args.pairs is None else args.pairs
    spec = TaskSpec(args.task, pairs, args.answer, EXTRAPOLATE if args.task == "recall" else ())
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

    cfg = variant_config(args.variant, size=args.size, vocab_size=VOCAB_SIZE, **overrides)
    tuned = args.recipe == "tuned"
    if tuned:
        budget = recipe_budget(args.lr_scale, args.steps)
    else:
        budget = TextBudget.for_steps(args.steps, args.lr_scale)
    corpus = load_corpus()
    bar = tqdm(total=budget.steps, unit="step", file=sys.stderr, dynamic_ncols=True)

    def progress(step, loss):
        bar.update()
        if step % 25 == 0:
            bar.set_postfix(loss=f"{loss:.4f}")

    result = fit_text(cfg, args.seed, budget, corpus, progress, compile=tuned and compile_default())
    bar.close()
    print(f"{args.variant} text seed={args.seed}: {result.model.num_parameters():,} parameters, "
          f"{budget.steps:,} steps of {budget.batch_size} windows of {budget.context} characters, "
          f"{result.seconds:.1f} s")
    print(f"{'step':>6} {'train loss':>11} {'val loss':>9}")
    for row in result.val_curve:
        print(f"{row['step']:>6} {row['train_loss']:>11.4f} {row['val_loss']:>9.4f}")
    for name, what in {**TEXT_ENDPOINTS, **(SELECTION if tuned else {})}.items():
        v = result.endpoints[name]
        value = "not defined" if math.isnan(v) else f"{v:.4f} nats = {v / math.log(2):.4f} bits per character"
        print(f"{name:<10} {value}  ({what})")
    return 0


def cmd_study(args) -> int:
    settings = study_settings(args.quick, args.steps, args.seeds, args.cache_dir, args.list)
    if args.only and "tuned" in args.only:
        return _study_tuned(args, settings)
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


def _study_tuned(args, settings) -> int:
    """`llamanat study --only tuned`: the tuned text study, alone (its stages follow from
    its own stored runs, so it mixes with no other measurement)."""
    if args.only != ["tuned"] or args.seeds or args.added_seeds:
        raise ValueError("--only tuned runs the tuned text study on its own: no other measurement, "
                         "no --seeds (its stages choose them), no --added-seeds")
    steps = None if settings.budget == Budget() else settings.budget.steps
    if args.list:
        stored = stored_in(settings.cache_dir)
        p = tuned_study_plan(stored, steps, compile=settings.compile)
        for stage, runs in p.items():
            print(f"{stage}: {len(runs)} runs ({sum(stored(r) is not None for r in runs)} stored)")
        for r in unique_runs(p):
            print(r.key, r.label)
        print(_time_left_words(time_left(p, stored, args.workers), args.workers), file=sys.stderr)
        return 0
    run_tuned(settings.cache_dir, args.workers, steps, settings.weights_dir, compile=settings.compile,
              planner=tuned_study_plan, executor=args.executor, **_executor_options(args, ("tuned",)))
    print(f"study: tuned summary written to {settings.cache_dir / 'tuned_results.csv'}", file=sys.stderr)
    return 0


def _time_left_words(left: dict[str, dict], workers: int) -> str:
    """`time_left` in one line: runs left per size, and hours where a size has a timed run."""
    parts = []
    for size, t in left.items():
        when = (f"about {t['hours']:.1f} h at the median {t['median_seconds']:.0f} s a run"
                if t["hours"] is not None else "no run stored yet to time")
        parts.append(f"{size}: {t['left']} runs left, {when}")
    return (f"study: {'; '.join(parts)} ({workers} worker(s); brackets still growing and seeds "
            "the rule has yet to add come on top)")


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
    print(f"verify: re-fitting the first {VERIFY_STEPS} steps of committed runs, fewer where their "
          f"learning rates sum past {VERIFY_LR_SUM:g} (plain loop, 1 thread); tolerance "
          f"{TOLERANCE:.0e} on every step's training loss", file=sys.stderr)
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


COMMANDS = {"params": cmd_params, "cache": cmd_cache, "fit": cmd_fit, "study": cmd_study,
            "verify": cmd_verify, "chapters": cmd_chapters}
# What a command raises when the reader's input or the files are wrong: one line, exit 2.
ERRORS = (ValueError, FileNotFoundError, WriteError, ChapterError)
