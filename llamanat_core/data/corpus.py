"""The text task's corpus on disk: Jane Austen's six novels, one checked file each.

They come from Debian's `r-cran-janeaustenr` (1.0.0-1): `tools/ensure_corpus.sh` fetches
the package, and `write_corpus` reads the six novels out of its R data files
(`rdata.read_lazyload`) into one text file each, checked against the SHA-256 recorded
here, and keeps the package beside them (`package_deb`: the tests read the real database
from it). The text is never committed. This module needs no torch, so `make corpus`
checks the files in a moment: `python -m llamanat_core.data.corpus check | unpack STEM [DEB]`.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from ..paths import corpus_dir
from ..util import atomic_write_bytes, atomic_write_text
from .rdata import read_lazyload

# In order of publication; the R package's variable names.
NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey",
          "persuasion")
TITLES = {"sensesensibility": "Sense and Sensibility", "prideprejudice": "Pride and Prejudice",
          "mansfieldpark": "Mansfield Park", "emma": "Emma", "northangerabbey": "Northanger Abbey",
          "persuasion": "Persuasion"}
# One file per novel: its lines joined by "\n". A different text would be another study.
SHA256 = {
    "sensesensibility": "0996d90842bbe8093f3b8142c1e77d1b20cff52d1d0615f3ed67733653e74e26",
    "prideprejudice": "2e44edaa4946d64ad541c68e0224f5d672f43bf3ce2a8a0b0637ad5e02fc6eb3",
    "mansfieldpark": "e0e9ef3863ea77f51f6070062ee0dd50ad9b933223880617629e4e4963ea40ff",
    "emma": "dd08b340a56ad4a0a00718d5682528a5a5886ae0aef91c9e0fa528074fa64b75",
    "northangerabbey": "8618a5acf5be50cc6e9b7680c7469fb6012649ab08c709dfc63c6367989fd31d",
    "persuasion": "726513a6c18bb678427bcbcf7c72d0d20816a67c25b0471b26ddcabf3ebac140",
}
FETCH = "make corpus"  # the one command that fetches and unpacks the text
PACKAGE, VERSION = "r-cran-janeaustenr", "1.0.0-1"
RDATA = "usr/lib/R/site-library/janeaustenr/data/Rdata"
"""The lazy-load database's stem inside the package's files."""


class CorpusError(ValueError):
    """The corpus is missing or is not the text the study was run on (one line, naming the
    file and what to do)."""


def novel_path(name: str, folder: Path | None = None) -> Path:
    return Path(folder or corpus_dir()) / f"{name}.txt"


def read_novel(name: str, folder: Path | None = None) -> str:
    """One novel's text, refused unless its SHA-256 is the recorded one."""
    if name not in SHA256:
        raise ValueError(f"unknown novel {name!r}; choose one of {list(NOVELS)}")
    path = novel_path(name, folder)
    if not path.exists():
        raise CorpusError(f"{path} is missing: run `{FETCH}` to fetch and unpack the corpus")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256[name]:
        raise CorpusError(f"{path} is not the recorded text ({len(data):,} bytes, SHA-256 "
                          f"differs): delete it and run `{FETCH}`")
    return data.decode("utf-8")


def package_deb(folder: Path | None = None) -> Path | None:
    """The Debian package `make corpus` fetched and kept in the corpus folder, or None
    (a corpus unpacked before the package was kept, or copied from another machine)."""
    debs = sorted(Path(folder or corpus_dir()).glob(f"{PACKAGE}_{VERSION}_*.deb"))
    return debs[-1] if debs else None


def write_corpus(rdata_stem: Path, folder: Path | None = None, deb: Path | None = None) -> list[Path]:
    """Read the six novels from the unpacked package's `data/Rdata` lazy-load database and
    write one checked text file each (atomically), and a copy of the package `deb` it came
    from when given; returns the novels' files."""
    novels = read_lazyload(Path(rdata_stem))
    folder = Path(folder or corpus_dir())
    written = []
    for name in NOVELS:
        if name not in novels:
            raise CorpusError(f"{rdata_stem}.rdb holds no {name!r}: not the janeaustenr package")
        text = "\n".join("" if line is None else line for line in novels[name])
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != SHA256[name]:
            raise CorpusError(f"{rdata_stem}.rdb: {name!r} is not the recorded text "
                              f"(another version of the package?)")
        path = novel_path(name, folder)
        atomic_write_text(path, text)
        written.append(path)
    if deb is not None:
        atomic_write_bytes(folder / Path(deb).name, Path(deb).read_bytes())
    return written


def check_corpus(folder: Path | None = None) -> str | None:
    """None when every novel is present and as recorded, else the first problem (one line)."""
    for name in NOVELS:
        try:
            read_novel(name, folder)
        except CorpusError as e:
            return str(e)
    return None


def main(argv: list[str]) -> int:
    """`python -m llamanat_core.data.corpus check` (exit 1 with the problem if the corpus is not
    ready) or `... unpack STEM [DEB]` (write the novels from an unpacked package's data,
    and keep the package DEB they came from)."""
    if argv[:1] == ["check"] and len(argv) == 1:
        problem = check_corpus()
        if problem:
            print(problem, file=sys.stderr)
        return 1 if problem else 0
    if argv[:1] == ["unpack"] and len(argv) in (2, 3):
        try:
            paths = write_corpus(Path(argv[1]), deb=Path(argv[2]) if len(argv) == 3 else None)
        except (CorpusError, OSError, ValueError) as e:
            print(f"corpus: {e}", file=sys.stderr)
            return 1
        print(f"corpus: {len(paths)} novels in {paths[0].parent}", file=sys.stderr)
        return 0
    print("usage: python -m llamanat_core.data.corpus check | unpack RDATA_STEM [DEB]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
