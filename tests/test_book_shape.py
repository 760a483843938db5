"""Every chapter has the book's shape, ending with exercises whose worked solutions
execute (so nbval keeps them true).

Shape: no edition history inside a chapter (that lives on the "What changed" page); the
study's apparatus (decision tables, solve curves, per-seed strips and tables) only in the
results chapter; and a last section `## Exercises` with three to five
`### Exercise N (kind): title` subsections, at least one of kind *predict*, each followed
by its solution: a code cell tagged `hide-cell` (collapsed in the book) that ends in an
assertion. How long a chapter is and its key sentences in bold are advisory, reported by
`make lint-book` (tools/lint_book.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from llamanat_core.paths import ROOT

SOURCES = sorted((ROOT / "chapters").glob("*.md"))
EXERCISE = re.compile(r"^### Exercise (\d+) \((predict|change|derive|extend|explain)\): \S")
APPARATUS = ("decision_table(", "solve_curves_figure(", "seed_strip_figure(", "seed_table(")
APPARATUS_HOME = {"results", "methods"}

def exercise_problems(nb) -> list[str]:
    """What is wrong with a chapter's exercises, as sentences (empty when right)."""
    cells = nb.cells
    markdown = [(i, c.source) for i, c in enumerate(cells) if c.cell_type == "markdown"]
    heads = [i for i, text in markdown if re.search(r"^## ", text, re.M)]
    starts = [i for i, text in markdown if "## Exercises" in text.split("\n")]
    if not starts:
        return ["no '## Exercises' section"]
    if heads and heads[-1] != starts[-1]:
        return ["'## Exercises' is not the last section"]
    problems, found = [], []
    for i in range(starts[-1], len(cells)):
        for line in cells[i].source.splitlines() if cells[i].cell_type == "markdown" else []:
            if line.startswith("### "):
                m = EXERCISE.match(line)
                if not m:
                    problems.append(f"heading {line!r} is not '### Exercise N (kind): title'")
                    continue
                found.append((i, m.group(2)))
    if not 3 <= len(found) <= 5:
        problems.append(f"{len(found)} exercises (3 to 5 wanted)")
    if "predict" not in {k for _, k in found}:
        problems.append("no exercise of kind 'predict'")
    for n, (i, _) in enumerate(found):
        end = found[n + 1][0] if n + 1 < len(found) else len(cells)
        solutions = [c for c in cells[i + 1:end] if c.cell_type == "code"
                     and "hide-cell" in c.metadata.get("tags", [])]
        if not solutions or "assert " not in solutions[-1].source:
            problems.append(f"exercise {n + 1} has no collapsed (hide-cell) solution ending in an assertion")
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_chapter_has_the_books_shape(path):
    text = path.read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    problems = exercise_problems(nb)
    if re.search(r"\b(first|second|third) edition\b", text, re.I):
        problems.append("edition history inside a chapter (it belongs on the What changed page)")
    if path.stem not in APPARATUS_HOME:
        problems += [f"shows the study's apparatus ({a}...) that lives in the results chapter"
                     for a in APPARATUS if a in text]
    assert not problems, f"{path.stem}: " + "; ".join(problems)


def test_the_exercise_check_finds_what_is_wrong():
    good = ("## Exercises\n\n### Exercise 1 (predict): a\n\n```{code-cell} ipython3\n:tags: [hide-cell]\n\n"
            "assert 1\n```\n\n### Exercise 2 (change): b\n\n```{code-cell} ipython3\n:tags: [hide-cell]\n\n"
            "assert 2\n```\n\n### Exercise 3 (derive): c\n\n```{code-cell} ipython3\n:tags: [hide-cell]\n\n"
            "x = 3\nassert x\n```\n")
    assert exercise_problems(jupytext.reads(good, fmt="md:myst")) == []
    shown = good.replace(":tags: [hide-cell]\n\nassert 2", ":tags: [hide-input]\n\nassert 2")
    assert exercise_problems(jupytext.reads(shown, fmt="md:myst")) == [
        "exercise 2 has no collapsed (hide-cell) solution ending in an assertion"]
    two = good.split("### Exercise 3")[0]
    assert exercise_problems(jupytext.reads(two, fmt="md:myst")) == ["2 exercises (3 to 5 wanted)"]
    unnamed = good.replace("(predict)", "(guess)")
    problems = exercise_problems(jupytext.reads(unnamed, fmt="md:myst"))
    assert problems[0].startswith("heading '### Exercise 1 (guess)")
    assert exercise_problems(jupytext.reads("## Summary\n", fmt="md:myst")) == ["no '## Exercises' section"]


def test_the_shape_benchmark_counts_what_a_chapter_holds():
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import book_shape

    methods = book_shape.row(ROOT / "chapters" / "methods.md")
    text = (ROOT / "chapters" / "methods.md").read_text()
    assert methods["exercises"] == len(re.findall(r"^### Exercise \d", text, re.M)) >= 3
    assert methods["lines"] == len(text.splitlines()) and methods["words"] > 1_000
    assert methods["figures"] >= 1 and methods["in view"] == text.count(":pyobject:")


def test_chapters_import_only_what_they_use(tmp_path):
    """A chapter's code cells, as one script, have no unused import (ruff's F401): an import
    left behind by a rewrite is a name a reader looks for in vain."""
    import subprocess
    import sys

    for path in SOURCES:
        nb = jupytext.reads(path.read_text(), fmt="md:myst")
        jupytext.write(nb, str(tmp_path / f"{path.stem}.py"), fmt="py:percent")
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--isolated", "--select", "F401", "--output-format",
                             "concise", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
