"""Every chapter has the book's shape: short enough to read in a sitting, and ending with
exercises whose worked solutions execute (so nbval keeps them true).

Shape: at most 700 source lines and about 2,500 words of prose; no edition history inside
a chapter (that lives on the "What changed" page); the study's apparatus (decision tables,
solve curves, per-seed strips and tables) only in the results chapter; and a last
section `## Exercises` with three to five `### Exercise N (kind): title` subsections, at
least one of kind *predict*, each followed by its solution: a code cell tagged
`hide-cell` (collapsed in the book) that ends in an assertion. Every other `## ` section
sets its key sentence in bold, the one a reader would put on a slide (d2l's practice).
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from llamanat_core.paths import ROOT

SOURCES = sorted((ROOT / "chapters").glob("*.md"))
MAX_LINES, MAX_WORDS = 700, 2_600
EXERCISE = re.compile(r"^### Exercise (\d+) \((predict|change|derive|extend|explain)\): \S")
APPARATUS = ("decision_table(", "solve_curves_figure(", "seed_strip_figure(", "seed_table(")
APPARATUS_HOME = {"results", "methods"}

KEY_WORDS = 6  # a bold span this long is a sentence, not an emphasised word or a label
LIST_LABEL = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]+\*\*[^*\n]+\*\*", re.M)  # `- **Label.** ...`
BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)

NOT_YET: set[str] = set()
"""Chapters still being brought to the shape: each is expected to fail (strictly, so a
chapter that reaches the shape must leave this set)."""


def _param(path: Path):
    later = pytest.mark.xfail(strict=True, reason="not yet in the book's shape")
    marks = [later] if path.stem in NOT_YET else []
    return pytest.param(path, marks=marks, id=path.stem)


def prose_words(nb) -> int:
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)           # directives (figures, code in view)
    text = re.sub(r"\{glue:text\}`[^`]*`", "N", text)             # a glued number is one word
    return len(re.findall(r"[A-Za-z0-9][\w'’\-.,%×/]*", text))


def sections_without_key_sentence(nb) -> list[str]:
    """Titles of the `## ` sections (Exercises aside) with no bold span of at least
    KEY_WORDS words outside the bold lead-ins of list items."""
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)           # directives are not prose
    missing = []
    for section in re.split(r"^(?=## )", text, flags=re.M)[1:]:
        title = section.splitlines()[0][3:].strip()
        prose = LIST_LABEL.sub("", section)
        if title != "Exercises" and not any(len(s.split()) >= KEY_WORDS for s in BOLD.findall(prose)):
            missing.append(title)
    return missing


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


@pytest.mark.parametrize("path", [_param(p) for p in SOURCES])
def test_chapter_has_the_books_shape(path):
    text = path.read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    problems = exercise_problems(nb)
    lines = len(text.splitlines())
    if lines > MAX_LINES:
        problems.append(f"{lines} source lines (at most {MAX_LINES})")
    words = prose_words(nb)
    if words > MAX_WORDS:
        problems.append(f"{words} words of prose (about 2,500 at most)")
    if re.search(r"\b(first|second|third) edition\b", text, re.I):
        problems.append("edition history inside a chapter (it belongs on the What changed page)")
    problems += [f"section '{title}' has no key sentence in bold"
                 for title in sections_without_key_sentence(nb)]
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


def test_the_key_sentence_check_finds_a_section_without_one():
    page = ("# T\n\n## Has one\n\nIntro. **The score depends on the offset, never on the place.**\n\n"
            "## Labels only\n\n- **Not long context, nor anything at scale.** Two layers.\n"
            "  * **Nested labels do not count either, however long.** x\n\n"
            "## Emphasis only\n\nIt is **which** norm, and **where** it sits.\n\n"
            "```{figure} a.png\n**a bold caption inside a directive is not prose**\n```\n\n"
            "## Exercises\n\nNo key sentence needed here.\n")
    assert sections_without_key_sentence(jupytext.reads(page, fmt="md:myst")) == ["Labels only",
                                                                                   "Emphasis only"]
    fixed = page.replace("Two layers.", "Two layers. **The rows say nothing about long context.**")
    assert sections_without_key_sentence(jupytext.reads(fixed, fmt="md:myst")) == ["Emphasis only"]


def test_prose_words_count_glued_numbers_as_one_word_and_skip_directives():
    nb = jupytext.reads("Two words {glue:text}`x_y`.\n\n```{literalinclude} a.py\n:pyobject: f\n```\n",
                        fmt="md:myst")
    assert prose_words(nb) == 3


def test_the_shape_benchmark_counts_what_a_chapter_holds():
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import book_shape

    methods = book_shape.row(ROOT / "chapters" / "methods.md")
    text = (ROOT / "chapters" / "methods.md").read_text()
    assert methods["exercises"] == len(re.findall(r"^### Exercise \d", text, re.M)) >= 3
    assert methods["lines"] == len(text.splitlines()) and methods["words"] > 1_000
    assert methods["figures"] >= 1 and methods["in view"] == text.count(":pyobject:")


# ---------------------------------------------------------------- numbers as the prose writes them

ARTIFACTS = sorted((ROOT / "artifacts").glob("*.ipynb"))
HYPHEN_NUMBER = re.compile(r"(?<![\w.\[(-])-\d")      # "-0.38" (a hyphen for a minus sign)
RAW_INTEGER = re.compile(r"(?<![\w.,#-])\d{5,}(?![\w.,])")  # "102528" (no thousands separator)


def printed_numbers_problems(nb: dict) -> list[str]:
    """Numbers a chapter prints the wrong way, in its glued text and its HTML tables."""
    problems = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data, glued = out.get("data", {}), "scrapbook" in out.get("metadata", {})
            texts = [v for k, v in data.items() if (glued and k.endswith("text/plain")) or k == "text/html"]
            for text in ("".join(t) for t in texts):
                text = re.sub(r"<[^>]+>|#[0-9a-fA-F]{6}", " ", text)  # tags and colours are not prose
                problems += [f"hyphen for minus: {m.group()!r}" for m in HYPHEN_NUMBER.finditer(text)]
                problems += [f"no thousands separator: {m.group()!r}" for m in RAW_INTEGER.finditer(text)]
    return problems


@pytest.mark.parametrize("path", ARTIFACTS, ids=[p.stem for p in ARTIFACTS])
def test_chapters_print_numbers_as_the_prose_writes_them(path):
    import json
    problems = printed_numbers_problems(json.loads(path.read_text()))
    assert not problems, f"{path.stem}: " + "; ".join(sorted(set(problems))[:10])


def test_the_printed_number_check_finds_a_hyphen_and_a_raw_integer():
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}},
             "data": {"application/papermill.record/text/plain": "'-0.27 of 102528'"}}
    table = {"output_type": "execute_result",
             "data": {"text/html": "<td>-1.5</td><td style='color:#123456'>3</td>"}}
    fine = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "y"}},
            "data": {"application/papermill.record/text/plain": "'−0.27 of 102,528 (4-pair, 1e-3)'"}}
    nb = {"cells": [{"cell_type": "code", "outputs": [glued, table, fine]}]}
    assert sorted(printed_numbers_problems(nb)) == ["hyphen for minus: '-0'", "hyphen for minus: '-1'",
                                                    "no thousands separator: '102528'"]


@pytest.mark.parametrize("path", ARTIFACTS, ids=[p.stem for p in ARTIFACTS])
def test_chapters_print_no_warnings(path):
    """A warning in a committed chapter is a reader-visible defect, and its text holds
    machine paths that differ between checkouts (nbval would fail on another clone)."""
    import json
    nb = json.loads(path.read_text())
    stderr = [o.get("text", "") for c in nb["cells"] for o in c.get("outputs", [])
              if o.get("name") == "stderr"]
    assert not stderr, f"{path.stem} prints to stderr: {''.join(stderr[0])[:200]}"


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
