"""`make lint-book`: how long each document is against its target, and the chapters' key
sentences. Advisory: a document past its target is reported; only one past the ceiling,
15 % above the target, fails (exit status 1).

The targets: the README (the front door) 120 lines, CONTRIBUTING.md 150 lines, the code
walk (book/code.md) 1,600 words of prose; a chapter 700 source lines and 2,500 words of
prose, and every `## ` section but the exercises with its key sentence in bold (the one a
reader would put on a slide: a bold span of at least KEY_WORDS words, list labels aside),
where the ceiling lets 15 % of a chapter's sections go without one.

    python tools/lint_book.py [--root DIR]
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
CEILING = 1.15
"""A document fails only past its target times this."""

LINE_TARGETS = {"README.md": 120, "CONTRIBUTING.md": 150}
WORD_TARGETS = {"book/code.md": 1_600}
CHAPTER_LINES, CHAPTER_WORDS = 700, 2_500

KEY_WORDS = 6  # a bold span this long is a sentence, not an emphasised word or a label
LIST_LABEL = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]+\*\*[^*\n]+\*\*", re.M)  # `- **Label.** ...`
BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)
FENCE = re.compile(r"```.*?```", re.S)


# ---------------------------------------------------------------- what is counted

def prose_words(nb) -> int:
    """Words of a chapter's Markdown cells: directives (figures, code in view) left out,
    a glued number one word."""
    text = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = FENCE.sub(" ", text)
    text = re.sub(r"\{glue:text\}`[^`]*`", "N", text)
    return len(re.findall(r"[A-Za-z0-9][\w'’\-.,%×/]*", text))


def page_words(text: str) -> int:
    """Words of a Markdown page outside its code fences."""
    return len(FENCE.sub(" ", text).split())


def sections_without_key_sentence(nb) -> tuple[list[str], int]:
    """(titles of the `## ` sections, Exercises aside, with no bold span of at least
    KEY_WORDS words outside the bold lead-ins of list items; how many sections count)."""
    text = FENCE.sub(" ", "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    missing, counted = [], 0
    for section in re.split(r"^(?=## )", text, flags=re.M)[1:]:
        title = section.splitlines()[0][3:].strip()
        if title == "Exercises":
            continue
        counted += 1
        if not any(len(s.split()) >= KEY_WORDS for s in BOLD.findall(LIST_LABEL.sub("", section))):
            missing.append(title)
    return missing, counted


# ---------------------------------------------------------------- against the targets

@dataclass
class Measure:
    """One count of one document against its target (`higher` counts are worse)."""
    document: str
    what: str
    value: float
    target: float
    note: str = ""

    @property
    def ceiling(self) -> float:
        """15 % above the target; for a share whose target is none at all (no section
        without a key sentence), 15 % of the whole."""
        return self.target * CEILING if self.target else CEILING - 1

    @property
    def status(self) -> str:
        if self.value > self.ceiling:
            return "FAIL"
        return "over target" if self.value > self.target else "ok"

    def line(self) -> str:
        value, target = (f"{self.value:.0%}", f"{self.target:.0%}") if self.what.endswith("share") \
            else (f"{self.value:,.0f}", f"{self.target:,.0f}")
        text = f"{self.document:<26} {self.what:<26} {value:>7} of {target:>7}  {self.status}"
        return text + (f": {self.note}" if self.note and self.status != "ok" else "")


def chapter_measures(path: Path, root: Path) -> list[Measure]:
    text = path.read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    name = path.relative_to(root).as_posix()
    missing, counted = sections_without_key_sentence(nb)
    return [Measure(name, "source lines", len(text.splitlines()), CHAPTER_LINES),
            Measure(name, "words of prose", prose_words(nb), CHAPTER_WORDS),
            Measure(name, "no key sentence, share", len(missing) / max(counted, 1), 0.0,
                    "no key sentence in bold: " + "; ".join(missing))]


def measures(root: Path = ROOT) -> list[Measure]:
    """Every document's counts, the front door first, then the chapters in name order."""
    out = [Measure(name, "lines", len((root / name).read_text().splitlines()), target)
           for name, target in LINE_TARGETS.items()]
    out += [Measure(name, "words of prose", page_words((root / name).read_text()), target)
            for name, target in WORD_TARGETS.items()]
    for path in sorted((root / "chapters").glob("*.md")):
        out += chapter_measures(path, root)
    return out


def failed(found: list[Measure]) -> list[Measure]:
    """The counts past their ceiling."""
    return [m for m in found if m.status == "FAIL"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (this checkout)")
    args = ap.parse_args(argv)
    found = measures(args.root)
    for m in found:
        if m.status != "ok":
            print(m.line())
    over = sum(m.status == "over target" for m in found)
    bad = failed(found)
    print(f"{len(found)} counts: {len(found) - over - len(bad)} within target, {over} over it "
          f"(reported), {len(bad)} past the ceiling of {CEILING - 1:.0%} over (failing)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
