"""The private corners of pinned packages that the code leans on, each checked against the
installed package, so that an upgrade which changes one fails here, by name, before it
changes a number or a start-up: dynamo's guard entries and its graph cache on code objects
(`train/compiled.py`'s compiled step; that dynamo keeps graphs per code object is held by
test_train.py's test of the step's copies), and Ray's node start-up (`study/executors.py`'s local
instance). Each message names the pinned version and what to re-check."""
from __future__ import annotations

import inspect

import pytest
import torch

from llamanat_core.model.config import variant_config
from llamanat_core.model.model import TinyLlama
from llamanat_core.paths import ROOT
from llamanat_core.train import compiled
from llamanat_core.train.loop import TaskSpec
from llamanat_core.util import torch_threads


def pinned(package: str, installed: str) -> str:
    """'requirements.txt pins torch==2.13.0; installed: 2.13.0+cpu'."""
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    pin = next((ln for ln in pins if ln.startswith(f"{package}==")), f"{package} unpinned")
    return f"requirements.txt pins {pin}; installed: {installed}"


# ------------------------------------------------------------------ dynamo (train/compiled.py)

def _recorded_step(data, variant="llama"):
    """One step of `variant` through a copy of the step compiled with the eager backend
    (dynamo's choice of guards without inductor's compile), with every guard entry dynamo
    offers `compiled.tensor_and_state_guards` recorded beside what it kept."""
    seen: list = []

    def recording(entries):
        kept = compiled.tensor_and_state_guards(entries)
        seen.extend(zip(entries, kept))
        return kept

    step = compiled.FastStep(TinyLlama(variant_config(variant), 0).train(), 1, 1e-3, 1.0, compile=False)
    step.step_fn = torch.compile(compiled.train_step_copy(), backend="eager", dynamic=False,
                                 options={"guard_filter_fn": recording})
    with torch_threads(1):
        loss = step(data)
    return step, loss, seen


@pytest.fixture(scope="module")
def step_guards():
    data = TaskSpec("recall").make(0).splits(16, 0, 0).train.ids
    return data, *_recorded_step(data)


def test_dynamo_offers_the_guard_types_fast_sorts(step_guards):
    """Every guard dynamo builds for the step is of a type `train/compiled.py` has sorted: kept (the
    input tensors', the process state's) or dropped as fixed by the graph key. A new type,
    or a state guard renamed, would be dropped without a word and could hand one graph to
    a call it does not fit."""
    from torch._dynamo.guards import GuardBuilder

    where = pinned("torch", torch.__version__)
    renamed = [t for t in (*compiled.STATE_GUARDS, "TENSOR_MATCH") if not hasattr(GuardBuilder, t)]
    assert not renamed, (f"dynamo has no guard type {renamed} any more ({where}): re-sort "
                         f"compiled.STATE_GUARDS and check compiled.tensor_and_state_guards")
    _, _, _, seen = step_guards
    assert seen and all(isinstance(e.guard_type, str) for e, _ in seen), where
    unsorted = sorted({e.guard_type for e, _ in seen} - set(compiled.STATE_GUARDS) - {"TENSOR_MATCH"}
                      - set(compiled.KEY_GUARDS))
    assert not unsorted, (f"dynamo guards the compiled step with types train/compiled.py has not sorted: "
                          f"{unsorted} ({where}); add each to compiled.STATE_GUARDS (kept: the "
                          f"process's state) or compiled.KEY_GUARDS (dropped: fixed by the graph key)")


def test_the_kept_guards_are_the_input_tensors_and_the_state(step_guards):
    """dynamo hands the filter each tensor guard with the tensor as its value: the batch
    and the flat parameters are kept, the weightless template's parameters dropped."""
    data, step, _, seen = step_guards
    where = pinned("torch", torch.__version__)
    kept_tensors = [e.value for e, k in seen if k and e.guard_type == "TENSOR_MATCH"]
    assert any(v is data for v in kept_tensors) and any(v is step.params.flat for v in kept_tensors), (
        f"the guard on the step's batch or flat parameters no longer reaches the filter with the "
        f"tensor as its value ({where}): compiled.tensor_and_state_guards would drop it")
    dropped = [e for e, k in seen if not k and e.guard_type == "TENSOR_MATCH"]
    assert dropped and all(isinstance(e.value, torch.nn.Parameter) for e in dropped), where
    assert {e.guard_type for e, k in seen if k} & set(compiled.STATE_GUARDS), where


# ------------------------------------------------------------------ Ray (study/executors.py)

def test_rays_private_start_up_is_as_start_local_expects():
    """`start_local` binds a new local instance to 127.0.0.1 through Ray's single-machine
    switch, and after a start that timed out finds the half-started node in the traceback
    and stops its servers: each of those private names still does that."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants, services
    from ray._private.node import Node

    from llamanat_core.study import executors

    where = pinned("ray", ray.__version__)
    assert ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR == executors._SINGLE_MACHINE, (
        f"Ray reads its single-machine switch from another variable ({where}): "
        f"executors._SINGLE_MACHINE")
    saved = ray_constants.ENABLE_RAY_CLUSTER
    try:
        ray_constants.ENABLE_RAY_CLUSTER = False
        address = services.get_node_ip_address() if not ray.is_initialized() else "127.0.0.1"
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
    assert address == "127.0.0.1", (
        f"with ENABLE_RAY_CLUSTER off Ray no longer picks the loopback address ({where}): "
        f"executors.start_local would open a local instance on the network")
    assert executors._STARTUP_TIMEOUT in inspect.getsource(Node.__init__), (
        f"Ray's node no longer raises {executors._STARTUP_TIMEOUT!r} from its constructor "
        f"({where}): executors.start_local would not retry a slow start")
    try:
        inspect.signature(Node.kill_all_processes).bind(
            None, check_alive=False, allow_graceful=False, wait=True)
    except TypeError as e:
        pytest.fail(f"Node.kill_all_processes changed ({e}; {where}): "
                    f"executors._stop_half_started calls it")
