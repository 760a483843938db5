"""What a reader sees in the executed chapters, kept mechanically: no table cell cut short
with "...", no number in exponent notation ("1e+06"), and no NaN printed."""
import json
import re

import pytest

from llamanat_core.paths import ROOT

NOTEBOOKS = sorted((ROOT / "artifacts").glob("*.ipynb"))
PROBLEMS = {
    "a truncated cell": re.compile(r"(\.\.\.|…)</td>|(\.\.\.|…)\s*$", re.M),
    "exponent notation": re.compile(r"\de\+0\d"),
    "a NaN": re.compile(r"\bnan\b", re.I),
}


def output_texts(cell: dict) -> list[str]:
    """The text a reader sees of one cell's outputs: streams, plain text, HTML, Markdown
    (images are not text)."""
    out = []
    for o in cell.get("outputs", []):
        if "text" in o:
            out.append("".join(o["text"]))
        for kind, value in o.get("data", {}).items():
            if kind in ("text/plain", "text/html", "text/markdown"):
                out.append("".join(value) if isinstance(value, list) else value)
    return out


def problems(notebook: dict) -> list[str]:
    """Each problem found, with the cell's index and the offending text around it."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        for text in output_texts(cell):
            for name, pattern in PROBLEMS.items():
                for m in pattern.finditer(text):
                    found.append(f"cell {i}: {name}: {text[max(0, m.start() - 40):m.end() + 10]!r}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_executed_output_is_cut_short_in_exponents_or_nan(path):
    assert problems(json.loads(path.read_text())) == []


def _cell(html: str, plain: str = "") -> dict:
    return {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "execute_result", "data": {"text/html": html, "text/plain": plain}}]}]}


@pytest.mark.parametrize("html, plain, kind", [
    ("<td>grouped-query attention comes close to multi-h...</td>", "", "a truncated cell"),
    ("<td>base 1e+06: 102,528</td>", "", "exponent notation"),
    ("<td>[nan, nan, nan]</td>", "", "a NaN"),
    ("", "max |output|    NaN", "a NaN"),
])
def test_each_problem_is_caught(html, plain, kind):
    found = problems(_cell(html, plain))
    assert found and all(kind in f for f in found)


def test_ordinary_output_passes():
    """Words that merely contain the letters (nanoGPT), a range, an ellipsis in prose and
    1e-05 as an epsilon are not problems."""
    assert problems(_cell("<td>nanoGPT's block; seeds 0…9 ... of them</td><td>1e-05</td>")) == []
