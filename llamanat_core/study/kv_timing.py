"""The KV-cache timings: measured once (`probes.kv_cache_chapter.measure_timing`) into a
committed file that records the machine, which the KV-cache chapter reads."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..paths import KV_TIMING_PATH
from ..util import atomic_write_text


def write_timing(timing: dict, path: Path = KV_TIMING_PATH) -> Path:
    """Write the timing file atomically (temp file + os.replace)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(timing, indent=1, sort_keys=True) + "\n")
    return path


def load_timing(path: Path = KV_TIMING_PATH) -> dict:
    """The committed timings; a missing file or one without its fields is an error."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no KV-cache timing at {path}; measure it with "
                                "`llamanat study --only kv_cache` (or fresh=True)")
    timing = json.loads(path.read_text())
    missing = {"lengths", "cached_ms", "recompute_ms", "machine"} - timing.keys()
    if missing or not len(timing["lengths"]) == len(timing["cached_ms"]) == len(timing["recompute_ms"]):
        raise ValueError(f"KV-cache timing file {path} is malformed (missing {sorted(missing)})")
    return timing


def ensure_timing(measure: Callable[[], dict], force: bool = False) -> None:
    """Write `measure()` into KV_TIMING_PATH unless a readable file is there (or `force`).
    The measurement is passed in: it belongs to the chapter's probe, above the study."""
    if not force:
        try:
            load_timing()
            print(f"study: KV-cache timings present in {KV_TIMING_PATH}", file=sys.stderr)
            return
        except (OSError, ValueError) as e:
            print(f"study: KV-cache timings need measuring ({e})", file=sys.stderr)
    print("study: measuring KV-cache timings (about 20 s)", file=sys.stderr)
    write_timing(measure())
