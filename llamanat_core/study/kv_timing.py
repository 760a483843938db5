"""The KV-cache timings: measured once (`probes.kv_cache_chapter.measure_timing`) into a
committed file that records the machine, which the KV-cache chapter reads."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..paths import KV_TIMING_PATH
from ..util import atomic_write_text


def write_timing(timing: dict, path: Path = KV_TIMING_PATH) -> Path:
    """Write the timing file atomically (temp file + os.replace)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(timing, indent=1, sort_keys=True) + "\n")
    return path


def ensure_timing(force: bool = False) -> None:
    """Measure the timings into KV_TIMING_PATH unless a readable file is there (or `force`)."""
    from ..probes.kv_cache_chapter import load_timing, measure_timing

    if not force:
        try:
            load_timing()
            print(f"study: KV-cache timings present in {KV_TIMING_PATH}", file=sys.stderr)
            return
        except (OSError, ValueError) as e:
            print(f"study: KV-cache timings need measuring ({e})", file=sys.stderr)
    print("study: measuring KV-cache timings (about 20 s)", file=sys.stderr)
    write_timing(measure_timing())
