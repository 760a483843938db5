"""The repository's front door: the README's picture is what the code draws."""
from __future__ import annotations

from pathlib import Path

from llamanat_core import diagram

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "artifacts" / "figures" / "decoder.png"


def test_the_readme_picture_is_what_the_code_draws():
    """`make book` (make figures) writes it; an edit of the diagram or the reference
    Config that was not followed by `make figures` fails here."""
    assert PICTURE.read_bytes() == diagram.diagram_png(), (
        "artifacts/figures/decoder.png is stale: run `make figures` and commit it")
