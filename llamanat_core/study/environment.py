"""The machine a run trained on, as its run file records it."""
from __future__ import annotations

import platform
from pathlib import Path

import torch


def environment() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "platform": platform.platform(), "cpu": cpu}
