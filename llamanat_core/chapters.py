"""Execute the chapter notebooks with papermill into reproducible artifacts (SPEC §2, §8).

``chapters/NAME.ipynb`` (committed without outputs, one cell tagged ``parameters``) is
executed into ``artifacts/NAME.ipynb``. The kernel's working directory is the output
folder, the same place nbval later runs the artifact from, so a chapter behaves the
same under both; chapters locate data through the package, never through the cwd.

The executed notebook is sanitised so that executing it twice gives the same bytes:
no timings, no papermill bookkeeping beyond the parameters, fixed cell ids, no
interpreter version. It is written atomically (temporary file, then ``os.replace``).
"""
from __future__ import annotations

import ast
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS_DIR = ROOT / "chapters"
ARTIFACTS_DIR = ROOT / "artifacts"

# SPEC §8 order; the book's table of contents follows it.
CHAPTERS = ("model", "norm", "rope", "swiglu", "gqa", "sweep", "alphabet", "kv_cache")

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


def source_path(name: str, chapters_dir: Path | str = CHAPTERS_DIR) -> Path:
    path = Path(chapters_dir) / f"{name}.ipynb"
    if not path.exists():
        raise FileNotFoundError(f"chapter {name!r} has no source notebook at {path}")
    return path


def declared_parameters(path: Path | str) -> dict[str, dict]:
    """The parameters a chapter declares in its `parameters`-tagged cell (papermill's view)."""
    import nbformat
    import papermill as pm

    nb = nbformat.read(str(path), as_version=4)
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise ValueError(f"{path} has no cell tagged 'parameters'; every chapter must declare "
                         "its parameters (seeds, steps, fresh, ...) in one")
    return pm.inspect_notebook(str(path))


def check_parameters(name: str, parameters: dict | None, path: Path | str) -> dict:
    """Reject a parameter the chapter does not declare, naming it and the declared ones."""
    parameters = dict(parameters or {})
    declared = declared_parameters(path)
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise ValueError(f"chapter {name!r} does not declare parameter(s) {unknown}; "
                         f"it declares: {', '.join(sorted(declared)) or '(none)'}")
    return parameters


def parse_assignments(pairs) -> dict:
    """['steps=20', 'fresh=True', 'seeds=[0, 1]'] -> {'steps': 20, 'fresh': True, 'seeds': [0, 1]}.

    Values are Python literals; anything that is not one is kept as a string.
    """
    out = {}
    for pair in pairs or ():
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"parameter {pair!r} is not of the form NAME=VALUE")
        try:
            out[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            out[key] = text.strip()
    return out


def sanitize(nb, input_label: str):
    """Strip everything that changes between two executions of the same notebook."""
    meta = nb.metadata
    pm_meta = meta.get("papermill", {})
    meta["papermill"] = {k: pm_meta[k] for k in _KEEP_PAPERMILL if k in pm_meta}
    meta["papermill"]["input_path"] = input_label
    if "language_info" in meta:
        meta["language_info"] = {k: v for k, v in meta["language_info"].items()
                                 if k in _KEEP_LANGUAGE_INFO}
    for key in ("widgets", "toc-autonumbering", "varInspector"):
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
    return nb


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an artifact is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _kernel_environment():
    """The kernel inherits this environment: fixed hash seed, no interactive backends."""
    saved = {k: os.environ.get(k) for k in ("PYTHONHASHSEED", "MPLBACKEND")}
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ.pop("MPLBACKEND", None)  # the kernel picks its inline backend itself
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute_chapter(name: str, parameters: dict | None = None, out_dir: Path | str = ARTIFACTS_DIR,
                    kernel: str = "python3", chapters_dir: Path | str = CHAPTERS_DIR) -> Path:
    """Execute one chapter into out_dir/NAME.ipynb (sanitised, atomic); return its path."""
    import nbformat
    import papermill as pm

    (name,) = check_names([name])
    src = source_path(name, chapters_dir)
    parameters = check_parameters(name, parameters, src)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _kernel_environment():
        try:
            nb = pm.execute_notebook(str(src), None, parameters=parameters or None,
                                     kernel_name=kernel, progress_bar=False, log_output=False,
                                     cwd=str(out_dir), extra_arguments=_KERNEL_ARGUMENTS)
        except pm.PapermillExecutionError as exc:
            first = (exc.source or "").strip().splitlines()[:1]
            raise ChapterError(
                f"chapter {name!r} failed in cell {exc.cell_index}"
                f"{f' ({first[0][:60]!r})' if first else ''}: {exc.ename}: {exc.evalue}") from exc
    nb = sanitize(nb, f"chapters/{name}.ipynb")
    out = out_dir / f"{name}.ipynb"
    _atomic_write(out, nbformat.writes(nb) + "\n")
    return out


def run_chapters(names=None, parameters: dict | None = None, out_dir: Path | str = "artifacts",
                 kernel: str = "python3", chapters_dir: Path | str = CHAPTERS_DIR,
                 stream=None) -> list[Path]:
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
            path = execute_chapter(n, parameters, out_dir, kernel, chapters_dir)
        except BaseException:
            print(f" failed after {time.perf_counter() - t0:.1f} s", file=stream, flush=True)
            raise
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f" {time.perf_counter() - t0:6.1f} s  -> {rel}", file=stream, flush=True)
        written.append(path)
    if len(names) > 1:
        print(f"{len(names)} chapters in {time.perf_counter() - total:.1f} s", file=stream, flush=True)
    return written


__all__ = ["CHAPTERS", "ChapterError", "run_chapters", "execute_chapter", "check_names",
           "check_parameters", "declared_parameters", "parse_assignments", "sanitize"]
