"""Read an R package's lazy-load data (`data/Rdata.rdx` + `Rdata.rdb`) without R.

R keeps a package's data sets in a small database: the `.rdx` is a gzip-compressed,
serialized index whose `variables` map each name to an (offset, length) in the `.rdb`;
each entry there is a 4-byte big-endian length followed by zlib data, one serialized R
object. R's serialization (the "XDR" format, version 2 or 3) is a tree of typed items;
this reader knows the few types that character vectors, lists and their attributes use,
and names any other type it meets instead of guessing.
"""
from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

NIL, SYM, PAIRLIST, CHAR, LGL, INT, REAL, STR, LIST = 254, 1, 2, 9, 10, 13, 14, 16, 19
REF = 255
NA_STRING = -1


class RDataError(ValueError):
    """The bytes are not an R object this reader understands."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos, self.refs = data, 0, []

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise RDataError("serialized R data ends early")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def header(self):
        if self.take(2) != b"X\n":
            raise RDataError("not R's XDR serialization (expected 'X\\n')")
        version = self.int()
        self.take(8)  # the writer's and the minimal reader's R versions
        if version == 3:
            self.take(self.int())  # the native encoding's name
        elif version != 2:
            raise RDataError(f"R serialization version {version} (this reader knows 2 and 3)")

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == NIL:
            return None
        if kind == REF:
            return self.refs[(flags >> 8) - 1]
        if kind == SYM:
            name = self.item()  # a CHARSXP
            self.refs.append(name)
            return name
        if kind == PAIRLIST:
            return self.pairlist(has_attr, has_tag)
        if kind == CHAR:
            n = self.int()
            return None if n == NA_STRING else self.take(n).decode("utf-8")
        if kind in (LGL, INT, REAL):
            n = self.int()
            code, size = ("d", 8) if kind == REAL else ("i", 4)
            value = list(struct.unpack(f">{n}{code}", self.take(size * n)))
        elif kind == STR:
            value = [self.item() for _ in range(self.int())]
        elif kind == LIST:
            value = [self.item() for _ in range(self.int())]
        else:
            raise RDataError(f"R type {kind} is not one this reader knows")
        return _with_attributes(value, self.item() if has_attr else None)

    def pairlist(self, has_attr, has_tag) -> dict:
        """A tagged pairlist (how attributes travel) as a dict, tag → value."""
        out = {}
        while True:
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            out[tag] = self.item()
            flags = self.int()
            if flags & 0xFF == NIL:
                return out
            if flags & 0xFF != PAIRLIST:
                raise RDataError("a pairlist's tail is not a pairlist")
            has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)


def _with_attributes(value: list, attributes: dict | None):
    """A vector with a `names` attribute becomes a dict; any other attribute is dropped."""
    names = (attributes or {}).get("names")
    return dict(zip(names, value)) if names is not None else value


def unserialize(data: bytes):
    """One serialized R object (XDR, version 2 or 3) as Python lists, dicts and str."""
    reader = _Reader(data)
    reader.header()
    return reader.item()


def read_lazyload(stem: Path) -> dict:
    """Every variable of a lazy-load database (`stem.rdx` and `stem.rdb`), name → object."""
    stem = Path(stem)
    index = unserialize(gzip.decompress(stem.with_suffix(".rdx").read_bytes()))
    if not isinstance(index, dict) or "variables" not in index:
        raise RDataError(f"{stem}.rdx holds no 'variables' index")
    blob = stem.with_suffix(".rdb").read_bytes()
    out = {}
    for name, (offset, length) in index["variables"].items():
        entry = blob[offset:offset + length]
        if len(entry) != length:
            raise RDataError(f"{stem}.rdb is truncated: {name!r} runs past its end")
        size = struct.unpack(">I", entry[:4])[0]
        data = zlib.decompress(entry[4:])
        if len(data) != size:
            raise RDataError(f"{stem}.rdb: {name!r} unpacks to {len(data)} bytes, not {size}")
        out[name] = unserialize(data)
    return out
