"""Execute the chapter notebooks with papermill into reproducible artifacts.

``chapters/NAME.md`` is a MyST Markdown notebook (jupytext's ``myst`` format: text that
diffs and reviews like code, no outputs, one cell tagged ``parameters``). It is read
with jupytext and executed with papermill into ``artifacts/NAME.ipynb``, the notebook
the book publishes and nbval re-checks. The kernel's working directory is the output
folder, the same place nbval later runs the artifact from, so a chapter behaves the
same under both; chapters locate data through the package, never through the cwd.

The executed notebook is sanitised so that executing it twice gives the same bytes:
no timings, no papermill bookkeeping beyond the parameters, fixed cell ids, no
interpreter version. It is written atomically (temporary file, then ``os.replace``).
"""
from __future__ import annotations

import hashlib
import numbers
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..paths import ARTIFACTS_DIR, CHAPTERS_DIR, FRESH_DIR_ENV, ROOT
from ..study import SEEDS
from ..train.loop import Budget
from ..util import atomic_write_text
from . import claims

# The chapter order of the book; `_toc.yml` lists the same chapters in the same order.
CHAPTERS = ("model", "training", "text", "norm", "rope", "swiglu", "gqa", "sweep", "alphabet", "kv_cache",
            "anatomy", "results", "methods", "correction")

# Papermill bookkeeping that survives sanitising: what the chapter was run with.
_KEEP_PAPERMILL = ("parameters",)
# language_info fields that do not vary between interpreters of the same language.
_KEEP_LANGUAGE_INFO = ("name", "codemirror_mode", "file_extension", "mimetype",
                       "nbconvert_exporter", "pygments_lexer")
INJECTED_ID = "injected-parameters"
# The kernel's own log (ipykernel's transport warning at start, a KeyboardInterrupt
# notice when it is shut down) stays out of the progress lines. A kernel that dies still
# fails the run through papermill, and anything a cell prints lands in the notebook.
_KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]


class ChapterError(RuntimeError):
    """A chapter failed to execute; the message names the chapter and the failing cell."""


def check_names(names) -> tuple[str, ...]:
    """Validate chapter names; None or empty means all of them, in book order."""
    if names is None or (not isinstance(names, str) and len(names) == 0):
        return CHAPTERS
    if isinstance(names, str):
        names = (names,)
    unknown = [n for n in names if n not in CHAPTERS]
    if unknown:
        raise ValueError(f"unknown chapter name(s) {unknown}; the chapters are: {', '.join(CHAPTERS)}")
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return tuple(seen)


SOURCE_SUFFIX = ".md"  # MyST Markdown notebooks, read and written by jupytext


def source_path(name: str, chapters_dir: Path | str = CHAPTERS_DIR) -> Path:
    path = Path(chapters_dir) / f"{name}{SOURCE_SUFFIX}"
    if not path.exists():
        raise FileNotFoundError(f"chapter {name!r} has no source notebook at {path}")
    return path


def read_source(path: Path | str):
    """A chapter source as an nbformat NotebookNode (what papermill executes).

    The MyST format stores no cell ids, and jupytext invents random ones; each cell gets
    an id from a hash of its type and text instead, so the same source gives the same
    ids every time and an edited cell does not renumber the others."""
    import jupytext  # the notebook tools load only when a chapter is read or run

    nb = jupytext.read(str(path))
    # What papermill's own reader adds to a notebook file, and expects on a NotebookNode.
    nb.metadata.setdefault("papermill", {"default_parameters": {}, "parameters": {},
                                         "environment_variables": {}})
    used: set[str] = set()
    for cell in nb.cells:
        cell.metadata.setdefault("tags", [])
        cell.metadata.setdefault("papermill", {})
        digest = hashlib.sha1(f"{cell.cell_type}\0{cell.source}".encode()).hexdigest()
        cid, k = digest[:10], 1
        while cid in used:
            k += 1
            cid = f"{digest[:10]}-{k}"
        cell["id"] = cid
        used.add(cid)
    return nb


def declared_parameters(path: Path | str) -> dict[str, dict]:
    """The parameters a chapter declares in its `parameters`-tagged cell (papermill's view)."""
    from papermill.inspection import _infer_parameters  # inspect_notebook reads .ipynb only

    nb = read_source(path)
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise ValueError(f"{path} has no cell tagged 'parameters'; every chapter must declare "
                         "its parameters (seeds, steps, fresh, ...) in one")
    return {p.name: p._asdict() for p in _infer_parameters(nb)}


def check_parameters(name: str, parameters: dict | None, path: Path | str) -> dict:
    """Reject a parameter the chapter does not declare, naming it and the declared ones."""
    parameters = dict(parameters or {})
    declared = declared_parameters(path)
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ValueError(f"chapter {name!r} does not declare parameter(s) {unknown}; "
                         f"it declares: {', '.join(sorted(declared)) or '(none)'}")
    return parameters


class ChapterParameterError(ValueError):
    """A chapter parameter of the wrong type or out of range; the message says how to pass it."""


_HOW = {
    "seeds": 'papermill: -y "seeds: [0, 1]"; llamanat chapters: --seeds 0,1',
    "steps": "papermill: -p steps 100; llamanat chapters: --steps 100",
    "fresh": "papermill: -p fresh True; llamanat chapters: --fresh",
}


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _reject(name: str, problem: str) -> ChapterParameterError:
    return ChapterParameterError(f"chapter parameter {name!r}: {problem}. Pass it as {_HOW[name]}")


def _default_seeds() -> tuple[int, ...]:
    """The seeds of the committed study."""
    return tuple(SEEDS)


def check_chapter_parameters(seeds=None, steps=None, fresh=False) -> tuple[tuple[int, ...], int | None, bool]:
    """Validate a chapter's parameters (the cell after its `parameters` cell calls this).

    seeds: None (every seed of the committed study) or a non-empty list of distinct
    integers >= 0. steps: None (the committed budget) or an integer >= 1; another budget
    than the committed one needs fresh=True (the committed study is read as trained).
    fresh: a bool. Returns (seeds as a tuple, steps, fresh). A wrong value fails here,
    with a message naming the parameter and the syntax that passes it, instead of deep
    inside a cell: papermill's `-p seeds "[0,1]"` hands the chapter a string.
    """
    if not isinstance(fresh, bool):
        raise _reject("fresh", f"expected True or False, got {fresh!r} ({type(fresh).__name__})")
    if seeds is None:
        seeds = _default_seeds()
    elif isinstance(seeds, str):
        raise _reject("seeds", f"expected a list of integers, got the string {seeds!r} "
                               "(papermill's -p passes text; -y passes YAML)")
    elif _is_int(seeds):
        seeds = (seeds,)
    try:
        seeds = tuple(seeds)
    except TypeError:
        raise _reject("seeds", f"expected a list of integers, got {seeds!r}") from None
    if not seeds:
        raise _reject("seeds", "expected at least one seed, got an empty list")
    bad = [s for s in seeds if not _is_int(s) or s < 0]
    if bad:
        raise _reject("seeds", f"expected integers >= 0, got {bad!r} in {list(seeds)!r}")
    dupes = sorted({int(s) for s in seeds if seeds.count(s) > 1})
    if dupes:
        raise _reject("seeds", f"seed(s) {dupes} given more than once; each seed is one run")
    seeds = tuple(int(s) for s in seeds)
    if steps is not None:
        if not _is_int(steps):
            raise _reject("steps", f"expected a whole number of training steps, got {steps!r} "
                                   f"({type(steps).__name__})")
        if steps < 1:
            raise _reject("steps", f"expected at least 1 training step, got {steps}")
        steps = int(steps)
        if not fresh and steps != Budget().steps:
            raise _reject("steps", f"steps={steps} trains new runs, so it needs fresh=True "
                                   "(without it the chapter reads the committed study)")
    # The text describes the committed study with every seed: on any other run (fresh
    # runs, or a subset of the seeds) a claim the data no longer support warns instead.

    claims.set_committed_run(not fresh and seeds == _default_seeds())
    return seeds, steps, fresh


def sanitize(nb, input_label: str):
    """Strip everything that changes between two executions of the same notebook."""
    meta = nb.metadata
    pm_meta = meta.get("papermill", {})
    meta["papermill"] = {k: pm_meta[k] for k in _KEEP_PAPERMILL if k in pm_meta}
    meta["papermill"]["input_path"] = input_label
    if "language_info" in meta:
        meta["language_info"] = {k: v for k, v in meta["language_info"].items()
                                 if k in _KEEP_LANGUAGE_INFO}
    for key in ("widgets", "toc-autonumbering", "varInspector", "jupytext"):
        meta.pop(key, None)
    used: set[str] = set()
    for i, cell in enumerate(nb.cells):
        cmeta = cell.get("metadata", {})
        for key in ("papermill", "execution", "ExecuteTime", "collapsed", "scrolled"):
            cmeta.pop(key, None)
        tags = cmeta.get("tags", [])
        if "injected-parameters" in tags:
            cell["id"] = INJECTED_ID
        elif not cell.get("id") or cell["id"] in used:
            cell["id"] = f"cell-{i:03d}"
        used.add(cell["id"])
        if cell.get("outputs"):
            cell["outputs"] = merge_streams(cell["outputs"])
    return nb


def merge_streams(outputs: list) -> list:
    """Consecutive outputs to one stream as one: the kernel splits a cell's prints into
    outputs by timing, so the same prints can arrive as one output or two."""
    merged = []
    for out in outputs:
        last = merged[-1] if merged else {}
        same = out.get("output_type") == "stream" == last.get("output_type")
        if same and out.get("name") == last.get("name"):
            last["text"] = "".join(last["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


@contextmanager
def _kernel_environment(fresh_dir: Path | str | None = None):
    """The kernel inherits this environment: fixed hash seed, no interactive backends,
    and (if given) the folder for the chapter's own fresh=True runs."""
    saved = {k: os.environ.get(k) for k in ("PYTHONHASHSEED", "MPLBACKEND", FRESH_DIR_ENV)}
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ.pop("MPLBACKEND", None)  # the kernel picks its inline backend itself
    if fresh_dir is not None:
        os.environ[FRESH_DIR_ENV] = str(Path(fresh_dir).resolve())
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute_chapter(name: str, parameters: dict | None = None, out_dir: Path | str = ARTIFACTS_DIR,
                    kernel: str = "python3", chapters_dir: Path | str = CHAPTERS_DIR,
                    fresh_dir: Path | str | None = None) -> Path:
    """Execute one chapter into out_dir/NAME.ipynb (sanitised, atomic); return its path.

    `fresh_dir`: where the chapter's fresh=True runs are trained and cached (default: the
    study's own folder for a reader's re-runs)."""
    import nbformat  # the notebook tools load only when a chapter runs
    import papermill as pm

    (name,) = check_names([name])
    src = source_path(name, chapters_dir)
    parameters = check_parameters(name, parameters, src)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _kernel_environment(fresh_dir):
        try:
            nb = pm.execute_notebook(read_source(src), None, parameters=parameters or None,
                                     kernel_name=kernel, progress_bar=False, log_output=False,
                                     cwd=str(out_dir), extra_arguments=_KERNEL_ARGUMENTS)
        except pm.PapermillExecutionError as exc:
            first = (exc.source or "").strip().splitlines()[:1]
            raise ChapterError(
                f"chapter {name!r} failed in cell {exc.cell_index}"
                f"{f' ({first[0][:60]!r})' if first else ''}: {exc.ename}: {exc.evalue}") from exc
    nb = sanitize(nb, f"chapters/{name}{SOURCE_SUFFIX}")
    out = out_dir / f"{name}.ipynb"
    atomic_write_text(out, nbformat.writes(nb) + "\n")
    return out


def run_chapters(names=None, parameters: dict | None = None, out_dir: Path | str = "artifacts",
                 kernel: str = "python3", chapters_dir: Path | str = CHAPTERS_DIR,
                 stream=None, fresh_dir: Path | str | None = None) -> list[Path]:
    """Execute chapters (all, in book order, when `names` is None) with papermill.

    `parameters` go to every named chapter and must be declared by each of them; they
    are checked for all chapters before any runs. A relative `out_dir` is taken from the
    repository root. Progress (one line per chapter, elapsed seconds) goes to stderr.
    """
    stream = sys.stderr if stream is None else stream
    names = check_names(names)
    sources = {n: source_path(n, chapters_dir) for n in names}
    for n in names:
        check_parameters(n, parameters, sources[n])
    out_dir = Path(out_dir)
    if not out_dir.is_absolute():
        out_dir = ROOT / out_dir
    written = []
    total = time.perf_counter()
    for i, n in enumerate(names, 1):
        t0 = time.perf_counter()
        print(f"[{i}/{len(names)}] {n:<9}", end="", file=stream, flush=True)
        try:
            path = execute_chapter(n, parameters, out_dir, kernel, chapters_dir, fresh_dir)
        except BaseException:
            print(f" failed after {time.perf_counter() - t0:.1f} s", file=stream, flush=True)
            raise
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f" {time.perf_counter() - t0:6.1f} s  -> {rel}", file=stream, flush=True)
        written.append(path)
    if len(names) > 1:
        print(f"{len(names)} chapters in {time.perf_counter() - total:.1f} s", file=stream, flush=True)
    return written


__all__ = ["CHAPTERS", "ChapterError", "ChapterParameterError", "check_chapter_parameters",
           "read_source", "run_chapters", "execute_chapter", "check_names",
           "check_parameters", "declared_parameters", "sanitize"]
