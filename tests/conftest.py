"""Shared test set-up.

One thread, so float reductions (and thus every test) are deterministic. Unit tests train
eagerly by default (LLAMANAT_COMPILE=0: no compile time on a cold machine); the compiled
path the study uses is exercised explicitly by the tests marked `compile`.

Tests write only to temporary folders (pytest's `tmp_path`). The session checks it: a
file of the repository created, changed or deleted while the tests ran fails the run.
"""
import os
from pathlib import Path

os.environ.setdefault("LLAMANAT_COMPILE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
# Caches that Python, pytest and ruff keep for themselves, and the virtualenv.
_NOT_CHECKED = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache"}
_BEFORE = pytest.StashKey[dict]()


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
    session.config.stash[_BEFORE] = repository_files()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    after = repository_files()
    touched = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if touched:
        shown = "\n  ".join(touched[:20]) + ("\n  ..." if len(touched) > 20 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"tests wrote into the repository ({len(touched)} files); "
                   f"write to tmp_path instead:\n  {shown}")
        if reporter is not None:
            reporter.write_sep("=", "files changed by the tests", red=True)
            reporter.write_line(message)
        else:
            print(message)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

