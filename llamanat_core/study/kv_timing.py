"""The KV-cache timings: measured once (`book.helpers.kv_cache.measure_timing`, and
`measure_text_timing` for the trained text model) into committed files that record the
machine, which the KV-cache chapter reads."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..paths import KV_TEXT_TIMING_PATH, KV_TIMING_PATH
from ..util import atomic_write_text

TIMING_FIELDS = ("lengths", "cached_ms", "recompute_ms", "machine")
TEXT_TIMING_FIELDS = ("n_new", "cached_s", "recompute_s", "identical", "machine")


def write_timing(timing: dict, path: Path = KV_TIMING_PATH) -> Path:
    """Write the timing file atomically (temp file + os.replace)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(timing, indent=1, sort_keys=True) + "\n")
    return path


def load_timing(path: Path = KV_TIMING_PATH, fields=TIMING_FIELDS) -> dict:
    """The committed timings; a missing file or one without its `fields` is an error."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no KV-cache timing at {path}; measure it with "
                                "`llamanat study --only kv_cache` (or fresh=True)")
    timing = json.loads(path.read_text())
    missing = set(fields) - timing.keys()
    lengths = {len(timing[k]) for k in ("lengths", "cached_ms", "recompute_ms")
               if k in fields and k in timing}
    if missing or len(lengths) > 1:
        raise ValueError(f"KV-cache timing file {path} is malformed (missing {sorted(missing)})")
    return timing


def load_text_timing(path: Path = KV_TEXT_TIMING_PATH) -> dict:
    """The committed timing of generating text with and without the cache."""
    return load_timing(path, TEXT_TIMING_FIELDS)


def ensure_timing(measure: Callable[[], dict], force: bool = False, path: Path = KV_TIMING_PATH,
                  fields=TIMING_FIELDS) -> None:
    """Write `measure()` into `path` unless a readable file is there (or `force`). The
    measurement is passed in: it belongs to the chapter's helper, above the study."""
    if not force:
        try:
            load_timing(path, fields)
            print(f"study: KV-cache timings present in {path}", file=sys.stderr)
            return
        except (OSError, ValueError) as e:
            print(f"study: KV-cache timings need measuring ({e})", file=sys.stderr)
    print(f"study: measuring KV-cache timings into {path} (under a minute)", file=sys.stderr)
    write_timing(measure(), path)
