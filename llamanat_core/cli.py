"""`llamanat`: the command line. Every subcommand has --help.

This module is the parser alone and loads nothing heavy: the subcommands' bodies are in
`commands.py`, imported once the arguments parse."""
from __future__ import annotations

import argparse
import sys

from .model.config import REGIMES, VARIANTS


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
                       description="Print each variant, the field it changes and its exact parameter "
                                   "count, at the reference size (S) or the text study's larger one (M).")
    p.add_argument("--size", choices=("S", "M"), default="S",
                   help="the model size: S, the reference, or M, twice its width (default S)")


def _add_cache(sub) -> None:
    p = sub.add_parser("cache", help="KV-cache arithmetic, no training",
                       description="Exact KV-cache bytes for the tiny model's MHA/GQA/MQA and for LLaMA-1 "
                                   "7B-65B and Llama-2-70B at their context lengths.")
    p.add_argument("--positions", type=_positive, default=2048, help="positions for the tiny model (2048)")
    p.add_argument("--batch", type=_positive, default=1, help="batch size (1)")
    p.add_argument("--bytes", type=_positive, default=2, help="bytes per value (2 = fp16)")


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
    p.add_argument("--pairs", type=_positive, default=None,
                   help="recall pairs at training (the study's training length)")
    p.add_argument("--answer", choices=("name", "copy"), default="name", help="recall answer formulation")
    p.add_argument("--rope-theta", type=float, default=None, help="override the RoPE base")
    p.add_argument("--lr-scale", type=float, default=1.0,
                   help="text only: multiply the peak rate of 1e-3 (1; the tuned study's reference "
                        "is best at 8)")
    p.add_argument("--recipe", choices=("tuned", "first"), default="tuned",
                   help="text only: the tuned study's recipe (2,400 steps, decay on matrices, "
                        "compiled unless LLAMANAT_COMPILE=0) or the first text study's (800 eager steps)")
    p.add_argument("--size", choices=("S", "M"), default="S",
                   help="text only: S, the reference, or M, twice its width")
    p.add_argument("--threads", type=_positive, default=1, help="torch threads (1, as the study)")


def _add_study(sub) -> None:
    p = sub.add_parser("study", help="run the measurement plan (resumable, parallel)",
                       description="Run every run of the plan not already cached. Stop it with Ctrl-C or "
                                   "SIGTERM: the runs in flight are dropped, its workers end, every stored "
                                   "run is kept, and the same command resumes. One study at a time per "
                                   "cache folder (a lock file there names the running one). Runs train "
                                   "in a local process pool, or as Ray tasks (--executor ray) on this "
                                   "machine or a cluster; either way this process writes every run file.")
    p.add_argument("--only", nargs="+",
                   choices=("matrix", "length", "sweep", "alphabet", "kv_cache", "text", "text_lr", "tuned"),
                   help="only these measurements (default: all; kv_cache re-measures the timings; "
                        "text and text_lr are the first text study and its learning-rate check; "
                        "tuned, on its own, the tuned text study: every arm at its own best rate, "
                        "two sizes, trained stage by stage until nothing is left)")
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


def _add_verify(sub) -> None:
    p = sub.add_parser("verify", help="check committed runs against this code on this CPU",
                       description="Re-fit the first 50 steps of a sample of committed runs with the plain "
                                   "training loop and compare every step's loss with the committed one. "
                                   "Exit 1 naming the runs that differ.")
    p.add_argument("--sample", type=_positive, default=8, help="how many runs, spread over the plan (8)")
    p.add_argument("--runs", nargs="+", default=None, metavar="KEY", help="these run keys instead")
    p.add_argument("--cache-dir", default=None, help="the study to check (default artifacts/study)")


def _add_chapters(sub) -> None:
    p = sub.add_parser("chapters", help="execute chapters with papermill into artifacts/",
                       description="Execute chapters/NAME.md into artifacts/NAME.ipynb (all by default).")
    p.add_argument("names", nargs="*", help="chapter names (default: all, in book order)")
    p.add_argument("--seeds", type=_seeds, default=None, help="papermill parameter `seeds`")
    p.add_argument("--steps", type=_positive, default=None, help="papermill parameter `steps`")
    p.add_argument("--fresh", action="store_true", help="re-train the chapter's runs here")
    p.add_argument("--out", default=None,
                   help="output folder (default artifacts/, or .fresh/chapters/ with parameters)")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    # lazy: the commands load torch, pandas and the study (seconds), so they load only once
    # the arguments parse; `--help` and a mistyped option answer at once
    from . import commands

    try:
        return commands.COMMANDS[args.command](args)
    except commands.ERRORS as e:
        print(f"llamanat {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # the study has said what it kept; no traceback
        return 128 + getattr(e, "signum", 2)  # the shell's code for death by that signal


if __name__ == "__main__":
    sys.exit(main())
