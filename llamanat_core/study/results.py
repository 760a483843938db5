"""Running a plan through the cache, and the study as pandas frames.

`results.csv`: one row per (measurement, run, test checkpoint): the 300/600/900/1,200
columns of every run, plus a row at the stop when a run went past 1,200 steps.
`curves.csv`: one row per (run, evaluation): the dense validation curve.
"""
from __future__ import annotations

import json
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..model.config import REGIMES, VARIANTS
from ..paths import QUICK_DIR, STUDY_DIR, fresh_runs_dir
from ..train.loop import Budget
from ..util import atomic_write_text, remove_partial_writes
from .committed import is_committed, study_compile, study_weights_dir
from .executors import EXECUTORS, Stopped, stop_on_signals
from .lock import cache_lock
from .plan import MEASUREMENTS, interleave_graphs, plan, unique_runs
from .run import SEEDS, Run, check_seeds
from .run_files import load_entry, store
from .text_plan import TEXT_SEEDS, text_plan


class StudySettings(NamedTuple):
    """What `llamanat study` runs and where: budget, seeds, run-file folder, compiled or
    not, and where kept weights go."""
    budget: Budget
    seeds: tuple[int, ...]
    cache_dir: Path
    compile: bool
    weights_dir: Path


def study_settings(quick: bool = False, steps: int | None = None, seeds=None,
                   cache_dir: Path | None = None, listing: bool = False) -> StudySettings:
    """The study runner's policy. --quick: a tiny budget (60 steps, seeds 0-1) into .quick/.
    Otherwise the full budget (or a cap of `steps`) and seeds 0-9 into artifacts/study,
    which only ever holds the full, compiled budget: a reduced cap or LLAMANAT_COMPILE=0
    there is a ValueError (listing the committed runs is allowed either way)."""
    if quick:
        budget, seeds = Budget.for_steps(steps or 60), seeds or (0, 1)
        cache_dir = Path(cache_dir or QUICK_DIR)
    else:
        budget, seeds = Budget.for_steps(steps), seeds or SEEDS
        cache_dir = Path(cache_dir) if cache_dir else STUDY_DIR
        if is_committed(cache_dir) and budget != Budget():
            raise ValueError("a reduced --steps needs --quick or --cache-dir, so the committed "
                             "study only ever holds the full budget")
    committed = is_committed(cache_dir)
    # The committed study is compiled; an eager study (LLAMANAT_COMPILE=0) rounds differently,
    # so its runs have other keys and belong in another folder.
    compile = study_compile(committed=False) or (committed and listing)
    if not compile and committed:
        raise ValueError("LLAMANAT_COMPILE=0 trains eagerly, which the committed study is not; "
                         "add --cache-dir DIR")
    return StudySettings(budget, tuple(seeds), cache_dir, compile, study_weights_dir(cache_dir))


def run_study(runs: list[Run], cache_dir: Path = STUDY_DIR, workers: int = 1,
              weights_dir: Path | None = None, progress: bool = True,
              executor: str = "local", interleave: bool = True, **executor_options) -> dict[str, dict]:
    """Train what is not cached and store each result as it arrives; return all entries.

    Kept weights go to `weights_dir`; by default the committed study's folder for the
    committed study, and `cache_dir/weights` for any other cache (so a scratch study
    never writes into the repository). `interleave=False` keeps the runs' order (the
    added seeds run row by row) instead of spreading each compiled graph's runs."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose one of {sorted(EXECUTORS)}")
    cache_dir = Path(cache_dir)
    if weights_dir is None:
        weights_dir = study_weights_dir(cache_dir)
    entries = {r.key: e for r in runs if (e := load_entry(cache_dir, r, weights_dir)) is not None}
    todo = [r for r in runs if r.key not in entries]
    todo = interleave_graphs(todo) if interleave else todo
    say = (lambda msg: print(f"study: {msg}", file=sys.stderr)) if progress else (lambda msg: None)
    if not todo:
        say(f"all {len(runs)} runs are cached in {cache_dir}; nothing left to run")
        return entries
    with cache_lock(cache_dir, say):  # a second runner on this cache is refused here
        for folder in (cache_dir, cache_dir / "runs", weights_dir):
            for p in remove_partial_writes(folder):
                say(f"removed {p}, a write cut short by a killed study")
        # a runner that ended just before we took the lock may have stored some of them
        entries.update((r.key, e) for r in todo if (e := load_entry(cache_dir, r, weights_dir)))
        todo = [r for r in todo if r.key not in entries]
        if todo:
            say(f"{len(runs) - len(todo)} of {len(runs)} runs cached; running {len(todo)} "
                f"with {workers} worker(s) ({executor})")
            _train(todo, entries, cache_dir, weights_dir, executor, workers, progress, executor_options)
    return entries


def _train(todo: list[Run], entries: dict[str, dict], cache_dir: Path, weights_dir: Path,
           executor: str, workers: int, progress: bool, options: dict) -> None:
    """`run_study`'s loop: store each result as it arrives. Stopped (SIGTERM, SIGINT) or
    failing (a write), the executor ends its workers and one line says what was kept."""
    from tqdm.auto import tqdm  # the progress bar: only when runs are trained

    bar = tqdm(total=len(todo), unit="run", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    total, t0 = len(entries) + len(todo), time.perf_counter()
    received: list[int] = []
    try:
        with stop_on_signals() as received, \
                closing(EXECUTORS[executor](todo, workers, **options)) as results:
            for run, entry, weights in results:
                store(run, entry, weights, cache_dir, weights_dir)
                entries[run.key] = entry
                bar.set_postfix_str(run.label)
                bar.update()
    except BaseException as e:
        bar.close()
        stop = Stopped(received[0]) if received else None
        why = stop or ("Ctrl-C" if isinstance(e, KeyboardInterrupt) else "the error below")
        print(f"study: stopped by {why}: {len(entries)} of {total} runs are stored in {cache_dir} "
              f"(every stored run is complete); run the same command again to train the other "
              f"{total - len(entries)}", file=sys.stderr)
        if stop is not None:
            raise stop from None  # the signal, however an executor passed it on
        raise
    bar.close()
    if progress:
        print(f"study: ran {len(todo)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


# ---------------------------------------------------------------- results as pandas

# The identity columns of a run's rows, by kind of run, in the order the frames hold them.
# A text frame gets a `size` column (after `lr_scale`) only when one of its runs is not S.
RESULT_COLUMNS = {
    "puzzle": ("run", "task", "variant", "regime", "seed", "answer", "rope_theta", "tie_embeddings",
               "params", "steps", "min_steps", "solve_step", "censored", "stop_step"),
    "text": ("run", "variant", "seed", "rope_theta", "lr_scale", "params", "steps"),
}
CURVE_COLUMNS = {"puzzle": RESULT_COLUMNS["puzzle"],
                 "text": ("run", "variant", "seed", "rope_theta", "lr_scale")}
_VALUES = {
    "run": lambda r, e: r.key, "task": lambda r, e: r.task, "variant": lambda r, e: r.variant,
    "regime": lambda r, e: r.regime, "seed": lambda r, e: r.seed, "answer": lambda r, e: r.spec.answer,
    "rope_theta": lambda r, e: r.config.rope_theta, "tie_embeddings": lambda r, e: r.config.tie_embeddings,
    "lr_scale": lambda r, e: r.lr_scale, "size": lambda r, e: r.size, "params": lambda r, e: e["params"],
    "steps": lambda r, e: r.budget.steps, "min_steps": lambda r, e: r.budget.min_steps,
    "solve_step": lambda r, e: float("nan") if e["solve_step"] is None else float(e["solve_step"]),
    "censored": lambda r, e: e["solve_step"] is None, "stop_step": lambda r, e: e["stop_step"],
}
LONGER_TEST = ("test_acc_8", "test_acc_12")
LONGER_VAL = ("val_acc_8", "val_acc_12")


def _kind(run: Run) -> str:
    return "text" if run.task == "text" else "puzzle"


def _identity(r: Run, e: dict, table: dict, sized: bool) -> dict:
    names = table[_kind(r)]
    if sized and r.task == "text":
        names = names[:names.index("lr_scale") + 1] + ("size",) + names[names.index("lr_scale") + 1:]
    return {name: _VALUES[name](r, e) for name in names}


def _points(r: Run, e: dict) -> list[dict]:
    """A run's own columns of the results frame: one row per test checkpoint of a puzzle
    run; one row of a text run, its endpoints in nats per character (NaN where a learned
    position table cannot read the window)."""
    if r.task == "text":
        return [{**{k: float("nan") if v is None else v for k, v in e["endpoints"].items()},
                 "seconds": e["seconds"]}]
    stop, final_loss = e["stop_step"], e["final_loss"]
    return [{**point, "final": point["step"] == r.budget.min_steps, "at_stop": point["step"] == stop,
             "final_loss": final_loss} for point in e["curve"]]


def with_columns(df, columns):
    """`df` with each of `columns` present: a study with no recall run (a reader's addition
    runs) still has the longer-recall columns every reader of the frame expects, as NaN."""
    for col in columns:
        if col not in df:
            df[col] = float("nan")
    return df


def _tidy(runs_by: dict, entries: dict[str, dict], table: dict, points, longer) -> pd.DataFrame:
    """The rows of every run with an entry, its identity columns (`table`) then `points`;
    `measurement` first when runs come by measurement. Columns one kind of run lacks are
    NaN in its rows; a frame with a puzzle run has the longer-recall columns `longer`."""
    runs = [r for rs in runs_by.values() for r in rs]
    sized = any(r.task == "text" and r.size != "S" for r in runs)
    rows = []
    for measurement, rs in runs_by.items():
        head = {} if measurement is None else {"measurement": measurement}
        for r in rs:
            if (e := entries.get(r.key)) is not None:
                base = {**head, **_identity(r, e, table, sized)}
                rows += [{**base, **point} for point in points(r, e)]
    df = pd.DataFrame(rows)
    return with_columns(df, longer) if any(r.task != "text" for r in runs) else df


def frame(p: dict[str, list[Run]] | list[Run], entries: dict[str, dict]) -> pd.DataFrame:
    """The results as a tidy frame, for runs of any task: one row per (measurement, run,
    test checkpoint) of a puzzle run, one row per (measurement, run) of a text run. `p`
    is a plan (measurement -> runs; a `measurement` column) or a list of runs (none)."""
    runs_by = p if isinstance(p, dict) else {None: list(p)}
    return _tidy(runs_by, entries, RESULT_COLUMNS, _points, LONGER_TEST)


def curves_frame(runs: list[Run], entries: dict[str, dict]) -> pd.DataFrame:
    """The dense validation curves of runs of any task: one row per (run, evaluation)."""
    return _tidy({None: list(runs)}, entries, CURVE_COLUMNS, lambda r, e: e["dense"], LONGER_VAL)


def write_text_summary(p: dict[str, list], entries: dict[str, dict], cache_dir: Path = STUDY_DIR,
                       names: tuple[str, str] | None = None):
    """text_results.csv and text_curves.csv (or the two files `names`) from the cached text
    runs of plan `p`."""
    results, curves_name = names or (TEXT_RESULTS, TEXT_CURVES)
    runs = [r for r in unique_runs(p) if r.key in entries]
    df = frame(runs, entries)
    _write_if_changed(Path(cache_dir) / results, df.to_csv(index=False, float_format="%.10g"))
    curves = curves_frame(runs, entries)
    _write_if_changed(Path(cache_dir) / curves_name, curves.to_csv(index=False, float_format="%.6g"))
    return df


TEXT_RESULTS, TEXT_CURVES = "text_results.csv", "text_curves.csv"
TUNED_RESULTS, TUNED_CURVES = "tuned_results.csv", "tuned_curves.csv"  # the tuned text study


def load_text_results(cache_dir: Path = STUDY_DIR):
    """The text study as a frame: one row per run (`frame`)."""
    return _read(Path(cache_dir) / TEXT_RESULTS)


def load_text_curves(cache_dir: Path = STUDY_DIR):
    return _read(Path(cache_dir) / TEXT_CURVES)


def load_tuned_results(cache_dir: Path = STUDY_DIR):
    """The tuned text study as `text_design.decide_tuned` reads it: one row per stored run
    (the runner rewrites the file after each stage), with its `size` (the summary leaves
    the column out while every run is S, as the first text study's does)."""
    df = _read(Path(cache_dir) / TUNED_RESULTS)
    return df if "size" in df else df.assign(size="S")


def load_tuned_curves(cache_dir: Path = STUDY_DIR):
    df = _read(Path(cache_dir) / TUNED_CURVES)
    return df if "size" in df else df.assign(size="S")


def summary_path(cache_dir: Path = STUDY_DIR) -> Path:
    return Path(cache_dir) / "results.csv"


def curves_path(cache_dir: Path = STUDY_DIR) -> Path:
    return Path(cache_dir) / "curves.csv"


def _write_if_changed(path: Path, text: str) -> None:
    """Atomically, and not at all when the file already says exactly this."""
    if not (path.exists() and path.read_text() == text):
        atomic_write_text(path, text)


def write_summary(p: dict[str, list[Run]], entries: dict[str, dict], cache_dir: Path = STUDY_DIR):
    df = frame(p, entries)
    _write_if_changed(summary_path(cache_dir), df.to_csv(index=False, float_format="%.10g"))
    curves = curves_frame(unique_runs(p), entries)
    _write_if_changed(curves_path(cache_dir), curves.to_csv(index=False, float_format="%.6g"))
    return df


def _read(path: Path):

    if not path.exists():
        raise FileNotFoundError(f"no study results at {path}; run `llamanat study` first")
    return pd.read_csv(path)


def load_results(cache_dir: Path = STUDY_DIR, measurement: str | None = None, seeds=None):
    """The committed study as a tidy pandas frame (one row per measurement, run, checkpoint);
    `seeds` keeps only those (the first ten are `SEEDS`; the added ones come after)."""
    df = _read(summary_path(cache_dir))
    if seeds is not None:
        df = df[df.seed.isin(list(seeds))].reset_index(drop=True)
    if measurement is not None:
        if measurement not in MEASUREMENTS:
            raise ValueError(f"unknown measurement {measurement!r}; choose from {list(MEASUREMENTS)}")
        df = df[df.measurement == measurement].reset_index(drop=True)
    return df


def load_curves(cache_dir: Path = STUDY_DIR):
    """The dense validation curves: one row per (run, evaluation every 100 steps)."""
    return _read(curves_path(cache_dir))


def every_seed(seeds, fresh: bool = False) -> tuple[int, ...]:
    """The seeds a chapter that counts the study reads: when it asks for the default seeds
    (the first ten) of the committed study, every seed the study holds, the added ones
    included, so a count of solved seeds is out of the seeds each row ran; other seeds,
    or a reader's own runs (fresh=True), as asked."""
    seeds = tuple(int(s) for s in seeds)
    if not fresh and seeds == tuple(SEEDS):
        return tuple(sorted(int(s) for s in set(load_results().seed)))
    return seeds


def chapter_results(measurements, fresh: bool = False, seeds=SEEDS, steps: int | None = None,
                    workers: int = 1, variants=None, regime: str | None = "finite",
                    fresh_dir: Path | None = None):
    """What a chapter publishes: the committed study, or (fresh=True) its runs re-trained
    here through the resumable runner with the given seeds and cap of steps.
    `variants` keeps only those rows (a chapter re-trains just what it shows); `regime`
    keeps one data regime (None keeps both)."""
    if isinstance(measurements, str):
        measurements = (measurements,)
    if variants is not None:
        unknown = sorted(set(variants) - set(VARIANTS))
        if unknown:
            raise ValueError(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    seeds = check_seeds(int(s) for s in seeds)
    full = Budget()
    if not fresh:
        if steps not in (None, full.steps):
            raise ValueError(f"steps={steps} applies only with fresh=True; the committed "
                             f"study used a cap of {full.steps}")
        df = load_results()
        missing = sorted(set(seeds) - set(df.seed))
        if missing:
            raise ValueError(f"seeds {missing} are not in the committed study (it has "
                             f"{sorted(set(df.seed))}); use fresh=True to train them")
        keep = df.measurement.isin(measurements) & df.seed.isin(seeds)
        if variants is not None:
            keep &= df.variant.isin(variants)
        if regime is not None:
            keep &= df.regime == regime
        return df[keep].reset_index(drop=True)
    budget = Budget.for_steps(None if steps is None else int(steps))
    # compiled as the study unless LLAMANAT_COMPILE=0 (recorded in every run either way)
    regimes = REGIMES if regime is None else (regime,)
    p = plan(tuple(measurements), seeds, budget, compile=study_compile(committed=False), regimes=regimes)
    if variants is not None:
        p = {m: [r for r in runs if r.variant in variants] for m, runs in p.items()}
    where = fresh_runs_dir() if fresh_dir is None else Path(fresh_dir)
    entries = run_study(unique_runs(p), where, workers=workers, weights_dir=where / "weights")
    df = frame(p, entries)
    if regime is not None:
        df = df[df.regime == regime].reset_index(drop=True)
    return df


def chapter_text_results(fresh: bool = False, seeds=None, steps: int | None = None,
                         variants=None, workers: int = 1, fresh_dir: Path | None = None):
    """(runs, curves) of the text study a chapter shows, at the reference learning rate:
    the committed study's runs among `seeds` (every seed it has for None; an error if it
    has none of them), or with fresh=True the runs of `variants` re-trained here at a cap
    of `steps` (all of the text arms if None)."""
    if not fresh:
        if steps is not None:
            raise ValueError(f"steps={steps} applies only with fresh=True")
        runs, curves = load_text_results(), load_text_curves()
        runs = runs[runs.lr_scale == 1.0]
        if seeds is not None:
            seeds = check_seeds(int(s) for s in seeds)
            if not set(seeds) & set(runs.seed):
                raise ValueError(f"none of seeds {list(seeds)} is in the committed text study "
                                 f"(it has {sorted(set(runs.seed))}); use fresh=True")
            runs = runs[runs.seed.isin(list(seeds))]
    else:
        p = text_plan(("text",), check_seeds(int(s) for s in (seeds or TEXT_SEEDS)), steps)
        where = fresh_runs_dir() if fresh_dir is None else Path(fresh_dir)
        todo = [r for r in p["text"] if variants is None or r.variant in variants]
        entries = run_study(todo, where, workers=workers, weights_dir=where / "weights")
        runs, curves = frame(todo, entries), curves_frame(todo, entries)
    if variants is not None:
        runs = runs[runs.variant.isin(list(variants))]
    curves = curves[curves.run.isin(set(runs.run))]
    return runs.reset_index(drop=True), curves.reset_index(drop=True)


def chapter_curves(results, fresh: bool = False, fresh_dir: Path | None = None):
    """The dense curves (as `load_curves`) of the runs in `results`, a frame that
    `chapter_results` returned: the committed study's curves, or with fresh=True the
    reader's own runs, read from their run files in the fresh cache (where
    `chapter_results(..., fresh=True)` trained them)."""
    keys = list(dict.fromkeys(results.run))
    if not fresh:
        df = load_curves()
        return df[df.run.isin(keys)].reset_index(drop=True)
    where = fresh_runs_dir() if fresh_dir is None else Path(fresh_dir)
    ident = results.drop_duplicates("run").set_index("run")
    rows = []
    for key in keys:
        path = where / "runs" / f"{key}.json"
        if not path.exists():
            raise FileNotFoundError(f"no run file {path}: train the runs with chapter_results("
                                    f"..., fresh=True) first")
        base = {"run": key, **{c: ident.at[key, c] for c in CURVE_COLUMNS["puzzle"][1:]}}
        rows += [{**base, **point} for point in json.loads(path.read_text())["dense"]]
    df = with_columns(pd.DataFrame(rows, columns=None if rows else list(CURVE_COLUMNS["puzzle"])), LONGER_VAL)
    return df
