"""Shared test set-up.

One thread, so float reductions (and thus every test) are deterministic. Unit tests train
eagerly by default (LLAMANAT_COMPILE=0: no compile time on a cold machine); the compiled
path the study uses is exercised explicitly by the tests marked `compile`.

Tests write only to temporary folders (pytest's `tmp_path`). The session checks it: a
file of the repository created, deleted or given other bytes while the tests ran fails the
run; a file rewritten with the same bytes is reported as a warning.
"""
import ast
import hashlib
import os
from pathlib import Path

os.environ.setdefault("LLAMANAT_COMPILE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from nbval_figures import compare_figures_too  # noqa: E402

from llamanat_core.paths import ROOT

torch.set_num_threads(1)

# Caches that Python, pytest and ruff keep for themselves, the virtualenv, and the built book
# (`make test` builds it before the browser test reads it and saves screenshots beside it).
_NOT_CHECKED = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "_build"}
_BEFORE = pytest.StashKey[tuple]()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def repository_files(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Every file of the working tree (ignored ones included) -> (size, mtime_ns)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_CHECKED and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder, name)
            try:
                st = path.stat()
            except FileNotFoundError:  # deleted while we walked
                continue
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def pytest_sessionstart(session):
    files = repository_files()
    digests = {p: _digest(ROOT / p) for p in files}  # a few MB: well under a second
    session.config.stash[_BEFORE] = (files, digests)


def pytest_sessionfinish(session, exitstatus):
    if _BEFORE not in session.config.stash:
        return
    before, digests = session.config.stash[_BEFORE]
    after = repository_files()
    changed, rewritten = [], []
    for p in sorted(before.keys() | after.keys()):
        if before.get(p) == after.get(p):
            continue
        same = p in before and p in after and _digest(ROOT / p) == digests[p]
        (rewritten if same else changed).append(p)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for paths, what, fail in ((changed, "created, deleted or changed", True),
                              (rewritten, "rewritten with the same bytes", False)):
        if not paths:
            continue
        shown = "\n  ".join(paths[:20]) + ("\n  ..." if len(paths) > 20 else "")
        message = (f"tests wrote into the repository: {len(paths)} files {what}; "
                   f"write to tmp_path instead:\n  {shown}")
        if reporter is not None:
            reporter.write_sep("=", "files " + ("changed" if fail else "rewritten") + " by the tests",
                               red=fail, yellow=not fail)
            reporter.write_line(message)
        else:
            print(message)
        if fail:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Files whose tests run in order on one pytest-xdist worker: a notebook's cells share one
# kernel (nbval), the Ray tests must never start two local Ray instances at once, the
# browser tests share one headless browser and one server, and the parity tests one
# module fixture that trains (on two workers it would train twice).
ONE_WORKER = ("tests/test_ray.py", "tests/test_browser.py", "tests/test_hf.py")


def tests_using(fixture: str, path: str) -> set[str]:
    """The node ids (parameters aside) of the test functions of `path` that take `fixture`,
    read from the source: the scheduler sees node ids only, never fixtures."""
    tree = ast.parse((ROOT / path).read_text())
    return {f"{path}::{f.name}" for f in tree.body
            if isinstance(f, ast.FunctionDef) and fixture in {a.arg for a in f.args.args}}


# Tests that share one session fixture too costly to build twice: the tiny study, trained
# once per worker that asks for it, so all its tests go to one.
SHARED_FIXTURE = dict.fromkeys(tests_using("tiny_reference", "tests/test_study.py"), "the tiny study")


# Tests that compile the same graph (llama's recall step at test_train's SMALL budget): on
# one worker, one after the other, the second finds the graph in inductor's cache; on two
# workers at once both compile it (about 30 s each on a new machine's empty cache).
SAME_GRAPH = {f"tests/test_train.py::{t}": "llama's recall graph" for t in (
    "test_same_seed_is_bit_identical[recall-compiled]",
    "test_speed_path_computes_the_plain_loop[llama-recall-compiled]")}


def _one_worker_scope(nodeid: str) -> str | None:
    if nodeid in SAME_GRAPH:
        return SAME_GRAPH[nodeid]
    if (shared := SHARED_FIXTURE.get(nodeid.split("[", 1)[0])) is not None:
        return shared
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") or path in ONE_WORKER else None


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs the tests and nbval's notebooks in one pytest-xdist session, so
    neither waits for the other's last test. Each notebook and each file of ONE_WORKER is
    one unit of work, kept on one worker in order; every other test is scheduled on its
    own. (xdist's `--dist loadgroup` marks do not reach the scheduler under pytest 9, so
    the grouping is done here, for `--dist load` and `--dist loadgroup` alike.)"""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep the longest-first order set below

    class OneWorkerFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _one_worker_scope(nodeid) or nodeid

    return OneWorkerFiles(config, log)


# Tests of these tiers start processes (pools, kernels, servers) or compile: seconds each.
SLOW_TIERS = ("compile", "notebook", "pool")


def run_order(item) -> tuple[int, int]:
    """The longest units of work first, so no worker is left with one at the end while the
    other idles: the files of ONE_WORKER (Ray, the browser), then the notebooks, the larger
    first (more cells and figures), then the tests of SLOW_TIERS, and the many short tests
    last, where they fill both workers to the end."""
    scope = _one_worker_scope(item.nodeid)
    if scope is None or item.nodeid in SAME_GRAPH:
        return (2 if any(item.get_closest_marker(m) for m in SLOW_TIERS) else 3, 0)
    if scope.endswith(".ipynb"):
        return (1, -Path(str(item.fspath)).stat().st_size)
    return (0, 0)


def pytest_collection_modifyitems(config, items):
    """Items in `run_order` (stable: each file, each notebook keeps its order). nbval's
    notebooks compare their figures too (`compare_figures_too`)."""
    items.sort(key=run_order)
    compare_figures_too(items)


@pytest.fixture(scope="session")
def committed_results():
    """The committed study's results frame, loaded once for every test that reads it."""
    from llamanat_core.study import load_results

    return load_results()


@pytest.fixture(scope="session")
def tiny_reference(tmp_path_factory) -> Path:
    """The tiny study (tests/tiny_study.py) trained once in this process, one run after
    another: the files every executor, pool and resumed study must reproduce."""
    from tiny_study import tiny_runs

    from llamanat_core.study import run_study

    d = tmp_path_factory.mktemp("reference")
    run_study(tiny_runs(), d, workers=1, weights_dir=d / "weights", progress=False)
    return d


@pytest.fixture(scope="session")
def first_ten_results(committed_results):
    """The committed study's first ten seeds: the rows the mechanism and replication tests
    read (the seeds added later belong to the two-stage decisions)."""
    from llamanat_core.study import SEEDS

    return committed_results[committed_results.seed.isin(SEEDS)].reset_index(drop=True)


@pytest.fixture(scope="session")
def committed_decisions(committed_results):
    """`comparisons.decide` of the committed study (every seed it holds), computed once."""
    from llamanat_core.analysis import comparisons

    return comparisons.decide(committed_results)


@pytest.fixture(autouse=True)
def _claims_fail_by_default():
    """A chapter's parameter check marks the process as a reader's run (its claims warn);
    in the test process that mark must not leak from one test into the next."""
    from llamanat_core.book import claims

    claims.set_committed_run(True)
    yield
    claims.set_committed_run(True)
