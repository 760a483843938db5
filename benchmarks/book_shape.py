"""Per chapter: source lines, words of prose, figures, exercises, and package objects shown
in view (`literalinclude` with `:pyobject:`, or `inspect.getsource`), words as `make
lint-book` counts them. `python benchmarks/book_shape.py` prints one row per chapter and the totals."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import jupytext
import nbformat

from llamanat_core.paths import ROOT

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
from lint_book import prose_words  # noqa: E402  (one definition of a word: make lint-book's)
from test_book_shape import EXERCISE  # noqa: E402


def figures(notebook: Path) -> int:
    """Images in the executed chapter's outputs (a glued figure shown twice counts twice)."""
    if not notebook.exists():
        return 0
    nb = nbformat.read(str(notebook), as_version=4)
    return sum("image/png" in out.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for out in c.get("outputs", []) if not out.get("metadata", {}).get("scrapbook"))


def row(path: Path) -> dict:
    text = path.read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    return {"chapter": path.stem, "lines": len(text.splitlines()), "words": prose_words(nb),
            "figures": figures(ROOT / "artifacts" / f"{path.stem}.ipynb"),
            "exercises": sum(bool(EXERCISE.match(line)) for line in text.splitlines()),
            "in view": len(re.findall(r":pyobject:|inspect\.getsource\(", text))}


def main() -> None:
    rows = [row(p) for p in sorted((ROOT / "chapters").glob("*.md"))]
    cols = ["chapter", "lines", "words", "figures", "exercises", "in view"]
    print(" ".join(f"{c:>10}" for c in cols))
    for r in rows:
        print(" ".join(f"{r[c]:>10,}" if c != "chapter" else f"{r[c]:>10}" for c in cols))
    print(" ".join(f"{sum(r[c] for r in rows):>10,}" if c != "chapter" else f"{'total':>10}" for c in cols))


if __name__ == "__main__":
    main()
