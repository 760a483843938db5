"""`make publish`'s second step (`make gh-pages`) in a temporary clone: a built book (here a
minimal `_build/html`) becomes the gh-pages branch, pushed only when a remote is set."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llamanat_core.paths import ROOT

BIN = Path(sys.executable).parent  # the virtualenv's bin, which holds the pinned ghp-import
IDENTITY = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **IDENTITY}).stdout


@pytest.fixture
def clone(tmp_path):
    """A clone of this repository with the working tree's Makefile and tools (what is being
    tested), no remote, and a built book of one page and one static file."""
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(repo))
    git(repo, "remote", "remove", "origin")  # never the real repository
    shutil.copy(ROOT / "Makefile", repo / "Makefile")
    shutil.copytree(ROOT / "tools", repo / "tools")
    html = repo / "_build" / "html"
    (html / "_static").mkdir(parents=True)
    (html / "index.html").write_text("<html><title>LLaMA Anatomy</title></html>\n")
    (html / "_static" / "book.css").write_text("body {}\n")
    return repo


def make_gh_pages(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "gh-pages", f"BIN={BIN}"], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, **IDENTITY}, timeout=120)


def test_the_book_becomes_the_gh_pages_branch_and_nothing_is_pushed_without_a_remote(clone):
    out = make_gh_pages(clone)
    assert out.returncode == 0, out.stderr
    assert "no remote 'origin' is configured, so nothing was pushed" in out.stdout
    assert git(clone, "show", "gh-pages:index.html") == "<html><title>LLaMA Anatomy</title></html>\n"
    files = set(git(clone, "ls-tree", "-r", "--name-only", "gh-pages").split())
    assert files == {".nojekyll", "index.html", "_static/book.css"}  # .nojekyll: Pages serves _static
    make_gh_pages(clone)  # a second publish replaces the book rather than adding to a history
    assert git(clone, "rev-list", "--count", "gh-pages").strip() == "1"


def test_with_a_remote_the_branch_is_pushed_there(clone, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(clone, "remote", "add", "origin", str(remote))
    out = make_gh_pages(clone)
    assert out.returncode == 0, out.stderr
    assert "gh-pages pushed to origin" in out.stdout
    assert "LLaMA Anatomy" in git(remote, "show", "gh-pages:index.html")


def test_without_a_built_book_nothing_is_published(clone):
    shutil.rmtree(clone / "_build")
    out = make_gh_pages(clone)
    assert out.returncode != 0 and "build the book first (make book)" in out.stderr
    with pytest.raises(subprocess.CalledProcessError):
        git(clone, "rev-parse", "--verify", "gh-pages")
