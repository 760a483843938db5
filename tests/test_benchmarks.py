"""The trainer benchmark's arithmetic: the FLOPs it divides by are the ones the step does.

`benchmarks/train_step.py` states a floor (matmul FLOPs at a measured rate) and the time
our step spends inside its matrix multiplies (profiled). Both rest on knowing which
matrix multiplies one step makes; here the profiled shapes of a real (eager) step are held
against the benchmark's closed-form count.
"""
import importlib.util
from collections import Counter

import pytest
import torch
from conftest import ROOT

from llamanat_core.config import variant_config
from llamanat_core.fast import FastStep
from llamanat_core.model import TinyLlama

_spec = importlib.util.spec_from_file_location("train_step_bench", ROOT / "benchmarks" / "train_step.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("task", ["addition", "recall"])
@pytest.mark.parametrize("variant", ["llama", "mqa", "mha"])
def test_profiled_gemms_are_the_counted_ones(task, variant):
    cfg = variant_config(variant)
    data, batches = bench.task_batches(task, n_items=200, batch=8, steps=4)
    t, alen = data.ids.shape[1] - 1, data.answer_len
    step = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0, compile=False)
    _, shapes = bench.gemm_profile(step, batches, steps=3)
    counted = bench.step_flops(cfg, t, alen, batch=8, truncated=True, attention=False)
    assert bench.gemm_flops(shapes) == counted
    # and the untruncated count is larger by exactly the rows the last layer skips
    assert bench.step_flops(cfg, t, alen, batch=8, attention=False) > counted


def test_gemm_profile_counts_per_step_and_times_something():
    calls = []

    def step(ids):  # two multiplies of known shapes per call
        calls.append(1)
        a = torch.ones(ids.shape[0], 5)
        torch.mm(a, torch.ones(5, 3))
        torch.addmm(torch.zeros(ids.shape[0], 2), a, torch.ones(5, 2))
    ms, shapes = bench.gemm_profile(step, [torch.zeros(4, 1)], steps=6)
    assert shapes == Counter({(4, 5, 3): 1, (4, 5, 2): 1})
    assert bench.gemm_flops(shapes) == 2 * 4 * 5 * 3 + 2 * 4 * 5 * 2
    assert ms > 0
    assert len(calls) == bench.WARMUP + 6
