"""What a chapter prints reads like the book, not like a Python session: no reprs
(`np.float64(0.19)`, `dtype: float64`, a raw dict, a tensor's repr) and no warnings, and
one rule for numbers everywhere a reader sees one (every printed output, table and
stream, and the glued prose): a true minus sign (−0.38, never -0.38) and thousands
separators (102,528).

The scans read the executed chapters in artifacts/, bound the width of their tables, and
require every exercise's worked solution to show its answer.
"""
from __future__ import annotations

import json
import re

import pytest

from llamanat_core.paths import ROOT

ARTIFACTS = sorted((ROOT / "artifacts").glob("*.ipynb"))

REPRS = {
    "a numpy scalar's repr": re.compile(r"\bnp\.(?:float|int|uint|bool|str)\w*\("),
    "a pandas Series footer": re.compile(r"(?:^|\n)(?:Name: .*, )?dtype: \w+"),
    "a tensor or array repr": re.compile(r"\b(?:tensor|array)\(|, dtype=\w"),
    "a raw dict": re.compile(r"\{\s*(?:'[^']*'|\"[^\"]*\"|-?\d[\d.]*)\s*:"),
    "an object's default repr": re.compile(r"<[\w.]+ object at 0x"),
    "float noise": re.compile(r"\d\.\d{9,}"),
}
# The one rule for numbers, in printed outputs and glued prose alike.
HYPHEN_NUMBER = re.compile(r"(?<![\w.\-])-\d")        # "-0.38", "[-4.0", "(-1": a hyphen as minus
RAW_INTEGER = re.compile(r"(?<![\w.,#^/−-])\d{4,}(?![\w.,])")  # "102528": no thousands separator
CITED_YEAR = re.compile(r"[A-Za-z.] (?:19|20)\d\d$")  # "Shazeer 2020", "et al. 2021": a citation
GLUED = "application/papermill.record/text/plain"


def printed_texts(nb: dict):
    """(cell index, text, glued) for everything a reader sees of a cell: streams, the text
    of a displayed value (its HTML with the tags removed, when it has one), errors, and
    the glued values the prose reads (glued True). Figures are left out."""
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                yield i, "".join(out["text"]), False
                continue
            data = out.get("data", {})
            if "scrapbook" in out.get("metadata", {}):
                if GLUED in data:
                    yield i, "".join(data[GLUED]), True
                continue
            if "image/png" in data:
                continue
            if "text/html" in data:
                html = "".join(data["text/html"])
                html = re.sub(r"<style.*?</style>", " ", html, flags=re.S)
                yield i, re.sub(r"<[^>]+>", " ", html), False
            elif "text/plain" in data:
                yield i, "".join(data["text/plain"]), False


def number_problems(text: str) -> list[str]:
    """Numbers written the wrong way: a hyphen for a minus sign, an integer of four or
    more digits without thousands separators (a cited year aside)."""
    return ([f"hyphen for minus: {m.group()!r}" for m in HYPHEN_NUMBER.finditer(text)]
            + [f"no thousands separator: {m.group()!r}" for m in RAW_INTEGER.finditer(text)
               if not CITED_YEAR.search(text[max(0, m.start() - 2):m.end()])])


def output_problems(nb: dict) -> list[str]:
    """What a chapter prints or glues the wrong way, one sentence per finding (a glued
    value is a string the prose reads, so only the number rule applies to it)."""
    problems = []
    for i, text, glued in printed_texts(nb):
        if not glued:
            for what, pattern in REPRS.items():
                problems += [f"cell {i}: {what}: {m.group().strip()!r}" for m in pattern.finditer(text)]
        problems += [f"cell {i}: {p}" for p in number_problems(text)]
    return problems


CHAPTER_IDS = [p.stem for p in ARTIFACTS]


@pytest.mark.parametrize("path", ARTIFACTS, ids=CHAPTER_IDS)
def test_chapters_print_what_a_reader_would(path):
    problems = output_problems(json.loads(path.read_text()))
    assert not problems, f"{path.stem}: " + "; ".join(problems[:12])


def _nb(*outputs) -> dict:
    return {"cells": [{"cell_type": "code", "outputs": list(outputs)}]}


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _shown(plain: str, html: str | None = None) -> dict:
    data = {"text/plain": plain} | ({"text/html": html} if html else {})
    return {"output_type": "execute_result", "data": data, "metadata": {}}


@pytest.mark.parametrize("text, finding", [
    ("(np.float64(0.1875), 0.375)", "a numpy scalar's repr"),
    ("a    1\nb    2\nName: seeds_needed, dtype: float64", "a pandas Series footer"),
    ("layernorm    +320\nmqa    −4,096\ndtype: str", "a pandas Series footer"),
    ("tensor([[1, 0],\n        [1, 1]], dtype=torch.int32)", "a tensor or array repr"),
    ("{'abs_pos': 3,072, 'mha': 8,192}", "a raw dict"),
    ("{10.0: 102,528}", "a raw dict"),
    ("0.011384358380189741", "float noise"),
    ("mqa    -4,096", "hyphen for minus"),
    ("[-4.0, 3.0] 5.0", "hyphen for minus"),
    ("13824", "no thousands separator"),
    ("2019 runs", "no thousands separator"),  # a year-like count with no name before it
])
def test_the_scan_finds_each_kind_of_mistake(text, finding):
    problems = output_problems(_nb(_stream(text)))
    assert any(finding in p for p in problems), problems


def test_the_scan_passes_what_the_book_prints_and_reads_tables_as_html():
    fine = ("102,528 parameters; embedding 61 × 64 = 3,904\n−0.38 and +1,280 (4-pair items, 1e-05,"
            " 2^19, layers (0-1), 10⁻⁶, #0072B2)\n[0.4, 0.8] of 2,048\n"
            "Shazeer 2020; Narang et al. 2021; Zhang & Sennrich 2019\n")  # citations keep their years
    table = _shown("x    -1\ndtype: int64", "<style>.a{margin:-1px}</style><table><td>−1</td></table>")
    image = {"output_type": "display_data", "data": {"image/png": "...", "text/plain":
                                                     "<IPython.core.display.Image object>"}}
    assert output_problems(_nb(_stream(fine), table, image)) == []
    assert output_problems(_nb(_shown("-1"))) == ["cell 0: hyphen for minus: '-1'"]


def test_the_scan_reads_glued_values_with_the_same_number_rule():
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}},
             "data": {GLUED: "'-0.27 of 102528 (dtype: float64)'"}}
    fine = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "y"}},
            "data": {GLUED: "'−0.27 of 102,528 (4-pair, 1e-3, Touvron et al. 2023)'"}}
    assert output_problems(_nb(glued, fine)) == ["cell 0: hyphen for minus: '-0'",
                                                 "cell 0: no thousands separator: '102528'"]


@pytest.mark.parametrize("path", ARTIFACTS, ids=CHAPTER_IDS)
def test_chapters_print_no_warnings(path):
    """A warning in a committed chapter is a reader-visible defect, and its text holds
    machine paths that differ between checkouts (nbval would fail on another clone)."""
    import json
    nb = json.loads(path.read_text())
    stderr = [o.get("text", "") for c in nb["cells"] for o in c.get("outputs", [])
              if o.get("name") == "stderr"]
    assert not stderr, f"{path.stem} prints to stderr: {''.join(stderr[0])[:200]}"


# ---------------------------------------------------------------- tables that fit the page

MAX_TABLE_WIDTH = 85
"""Characters across the text column at the tables' type size (book.css: 0.8rem), padding
counted as two characters a column; headers and text cells wrap at their spaces there."""


def table_width(html: str) -> int:
    """The narrowest a pandas HTML table can be drawn, in characters: per column its
    longest word (nothing narrower fits), plus two for the padding."""
    import html as entities

    widest: dict[int, int] = {}
    for row in re.findall(r"<tr.*?>(.*?)</tr>", html, re.S):
        column = 0
        for attrs, text in re.findall(r"<t[hd]([^>]*)>(.*?)</t[hd]>", row, re.S):
            span = re.search(r'colspan="(\d+)"', attrs)
            words = entities.unescape(re.sub(r"<[^>]+>", " ", text)).split()
            if span is None:  # a spanning header sits over columns that set the width
                widest[column] = max(widest.get(column, 0), max(map(len, words), default=0))
            column += int(span.group(1)) if span else 1
    return sum(w + 2 for w in widest.values())


def wide_tables(nb: dict) -> list[str]:
    return [f"cell {i}: {table_width(text)} characters" for i, cell in enumerate(nb["cells"])
            for out in cell.get("outputs", []) if "<table" in (text := "".join(out.get("data", {})
                                                                               .get("text/html", "")))
            if table_width(text) > MAX_TABLE_WIDTH]


@pytest.mark.parametrize("path", ARTIFACTS, ids=CHAPTER_IDS)
def test_chapter_tables_fit_the_text_column(path):
    assert wide_tables(json.loads(path.read_text())) == []


def test_table_width_is_the_longest_word_of_each_column():
    html = ("<table><tr><th></th><th colspan='2'>a very long spanning header</th></tr>"
            "<tr><th>model</th><th>bytes per position</th><th>size</th></tr>"
            "<tr><th>tiny GQA (reference)</th><td>1,073,741,824</td><td>1 GiB</td></tr></table>")
    assert table_width(html) == len("(reference)") + len("1,073,741,824") + len("size") + 3 * 2
    wide = "<table><tr>" + "<td>123456789</td>" * 9 + "</tr></table>"
    assert table_width(wide) == 99 > MAX_TABLE_WIDTH  # nine columns of big numbers do not fit
    assert wide_tables(_nb(_shown("", wide))) == ["cell 0: 99 characters"]


# ---------------------------------------------------------------- solutions that show their answer

def silent_solutions(nb: dict) -> list[str]:
    """The exercise solutions (collapsed `hide-cell` code cells after `## Exercises`) that
    show nothing when they run: no printed line, no displayed value. A warning on stderr
    is not an answer."""
    silent, in_exercises = [], False
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            in_exercises = in_exercises or "## Exercises" in source.splitlines()
            continue
        if not in_exercises or "hide-cell" not in cell.get("metadata", {}).get("tags", []):
            continue
        kinds = [(o.get("output_type"), o.get("name")) for o in cell.get("outputs", [])]
        shown = [k for k in kinds if k[0] in ("execute_result", "display_data") or k == ("stream", "stdout")]
        if not shown:
            silent.append(f"cell {i}: {source.splitlines()[0] if source else ''}")
    return silent


@pytest.mark.parametrize("path", ARTIFACTS, ids=CHAPTER_IDS)
def test_every_exercise_solution_shows_its_answer(path):
    assert silent_solutions(json.loads(path.read_text())) == []


def test_the_solution_scan_finds_a_solution_that_prints_nothing():
    def nb(*outputs):
        heading = {"cell_type": "markdown", "source": "## Exercises\n\n### Exercise 1 (predict): x"}
        solution = {"cell_type": "code", "source": "x = 1\nassert x == 1",
                    "metadata": {"tags": ["hide-cell"]}, "outputs": list(outputs)}
        return {"cells": [heading, solution]}
    warning = {"output_type": "stream", "name": "stderr", "text": "UserWarning: ..."}
    assert silent_solutions(nb()) == ["cell 1: x = 1"]
    assert silent_solutions(nb(warning)) == ["cell 1: x = 1"]
    assert silent_solutions(nb(_stream("x = 1"))) == [] == silent_solutions(nb(_shown("1")))
    before = {"cells": nb()["cells"][1:] + nb()["cells"][:1]}  # a hidden cell before the exercises
    assert silent_solutions(before) == []
