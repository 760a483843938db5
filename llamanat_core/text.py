"""The text task: next-character prediction on Jane Austen's six novels.

The corpus comes from Debian's `r-cran-janeaustenr` (1.0.0-1): `tools/ensure_corpus.sh`
fetches the package, and `write_corpus` reads the six novels out of its R data files
(`rdata.read_lazyload`) into one text file each, checked against the SHA-256 recorded
here. The text is never committed.

The split is by document, never by random window: the five novels written first train,
and *Persuasion*, the last one Austen finished, is held out whole — its first half
validates, its second half tests. A model is so judged on prose it has never seen a line
of, by the same author. Tokens are single characters: the 81 that occur in the six novels.
"""
from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import NamedTuple

import torch

from .paths import corpus_dir
from .rdata import read_lazyload
from .util import atomic_write_text

# In order of publication; the R package's variable names.
NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey",
          "persuasion")
TITLES = {"sensesensibility": "Sense and Sensibility", "prideprejudice": "Pride and Prejudice",
          "mansfieldpark": "Mansfield Park", "emma": "Emma", "northangerabbey": "Northanger Abbey",
          "persuasion": "Persuasion"}
TRAIN_NOVELS = NOVELS[:5]
HELD_OUT = "persuasion"  # first half validation, second half test
# One file per novel: its lines joined by "\n". A different text would be another study.
SHA256 = {
    "sensesensibility": "0996d90842bbe8093f3b8142c1e77d1b20cff52d1d0615f3ed67733653e74e26",
    "prideprejudice": "2e44edaa4946d64ad541c68e0224f5d672f43bf3ce2a8a0b0637ad5e02fc6eb3",
    "mansfieldpark": "e0e9ef3863ea77f51f6070062ee0dd50ad9b933223880617629e4e4963ea40ff",
    "emma": "dd08b340a56ad4a0a00718d5682528a5a5886ae0aef91c9e0fa528074fa64b75",
    "northangerabbey": "8618a5acf5be50cc6e9b7680c7469fb6012649ab08c709dfc63c6367989fd31d",
    "persuasion": "726513a6c18bb678427bcbcf7c72d0d20816a67c25b0471b26ddcabf3ebac140",
}
ALPHABET = ("\n !\"&'()*,-.0123456789:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_"
            "abcdefghijklmnopqrstuvwxyz£")
VOCAB_SIZE = len(ALPHABET)  # 81
_INDEX = {c: i for i, c in enumerate(ALPHABET)}
FETCH = "make corpus"  # the one command that fetches and unpacks the text


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


def encode(text: str) -> torch.Tensor:
    """Characters -> token ids (T,); a character outside the alphabet is an error."""
    try:
        return torch.tensor([_INDEX[c] for c in text], dtype=torch.long)
    except KeyError as e:
        raise ValueError(f"character {e.args[0]!r} is not in the text alphabet") from None


def decode(ids) -> str:
    return "".join(ALPHABET[int(i)] for i in ids)


class Corpus(NamedTuple):
    """Token ids of the three splits, each one long 1-D tensor."""
    train: torch.Tensor  # the five training novels, joined by a blank line
    val: torch.Tensor  # Persuasion's first half
    test: torch.Tensor  # Persuasion's second half


def split_held_out(text: str) -> tuple[str, str]:
    """The held-out novel cut at the line break nearest its middle: (validation, test)."""
    middle = text.rfind("\n", 0, len(text) // 2) + 1
    return text[:middle], text[middle:]


@functools.lru_cache(maxsize=2)
def load_corpus(folder: Path | None = None) -> Corpus:
    """The corpus as token ids, split by document (checked against the recorded hashes)."""
    train = "\n\n".join(read_novel(n, folder) for n in TRAIN_NOVELS)
    val, test = split_held_out(read_novel(HELD_OUT, folder))
    return Corpus(encode(train), encode(val), encode(test))


def training_windows(train: torch.Tensor, context: int, batch_size: int, steps: int,
                     seed: int) -> torch.Tensor:
    """(steps, batch) start offsets of the training windows, one fixed order per seed.

    Each window is `context + 1` characters (inputs and their next characters) starting
    anywhere in the training text. The first k steps do not depend on `steps`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, len(train) - context, (steps, batch_size), generator=g)


def gather(text: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    """Windows of `length` tokens at `starts` (B,) -> (B, length)."""
    return text[starts[:, None] + torch.arange(length)]


def windows(text: torch.Tensor, context: int, limit: int | None = None) -> torch.Tensor:
    """Non-overlapping windows of `context + 1` tokens covering the text -> (N, context + 1);
    consecutive windows share one token (the last target is the next input's first). The
    first `limit` windows only, if given."""
    n = (len(text) - 1) // context
    if limit is not None:
        n = min(n, limit)
    starts = torch.arange(n) * context
    return gather(text, starts, context + 1)


# ---------------------------------------------------------------- fetching the text

def write_corpus(rdata_stem: Path, folder: Path | None = None) -> list[Path]:
    """Read the six novels from the unpacked package's `data/Rdata` lazy-load database and
    write one checked text file each (atomically); returns the files written."""
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
    """`python -m llamanat_core.text check` (exit 1 with the problem if the corpus is not
    ready) or `... unpack STEM` (write the novels from an unpacked package's data)."""
    if argv[:1] == ["check"] and len(argv) == 1:
        problem = check_corpus()
        if problem:
            print(problem, file=sys.stderr)
        return 1 if problem else 0
    if argv[:1] == ["unpack"] and len(argv) == 2:
        try:
            paths = write_corpus(Path(argv[1]))
        except (CorpusError, OSError, ValueError) as e:
            print(f"corpus: {e}", file=sys.stderr)
            return 1
        print(f"corpus: {len(paths)} novels in {paths[0].parent}", file=sys.stderr)
        return 0
    print("usage: python -m llamanat_core.text check | unpack RDATA_STEM", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
