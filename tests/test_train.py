"""The trainer: deterministic, it learns, the speed path computes the plain loop, the stop
rule and the two data regimes do what the method page says, and the budget validates itself."""
import statistics

import pytest
import torch
from test_pinned_internals import pinned

from llamanat_core import VARIANTS, TinyLlama, variant_config
from llamanat_core.data.tasks import FreshStream, make_task
from llamanat_core.train import loop
from llamanat_core.train.loop import Budget, TaskSpec, batch_order, fit, training_losses
from llamanat_core.util import torch_threads

SMALL = Budget(steps=20, min_steps=20, eval_every=5, n_train=256, n_val=32, n_test=32,
               checkpoints=(10, 20))


# The compiled case runs on recall only: llama's recall graph under SMALL is the one
# test_speed_path_computes_the_plain_loop compiles too (inductor's cache then serves the
# second compile), and each further graph costs ~20 s on a cold cache. The addition graph's
# numbers are held against the plain loop on every CPU by `llamanat verify`, whose sample
# includes compiled addition runs of the study.
@pytest.mark.parametrize("task, compiled", [
    ("recall", False), ("addition", False),
    pytest.param("recall", True, marks=pytest.mark.compile)],
    ids=["recall-eager", "addition-eager", "recall-compiled"])
def test_same_seed_is_bit_identical(task, compiled):
    cfg = variant_config("llama")
    a = fit(cfg, TaskSpec(task), 0, SMALL, compile=compiled)
    torch.manual_seed(999)  # the global RNG must not matter
    b = fit(cfg, TaskSpec(task), 0, SMALL, compile=compiled)
    assert len(a.losses) == 20 and a.losses == b.losses
    assert a.test_curve == b.test_curve and [row["step"] for row in a.test_curve] == [10, 20]
    assert a.val_curve == b.val_curve and [row["step"] for row in a.val_curve] == [5, 10, 15, 20]
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    for row in a.test_curve:  # accuracy is an exact fraction of the 32 test items
        assert 0 <= row["test_acc"] <= 1 and (row["test_acc"] * 32).is_integer()
    # and the check can fail: another seed, other numbers
    c = fit(cfg, TaskSpec(task), 1, SMALL, compile=compiled)
    assert c.losses != a.losses


def test_batch_order_is_seeded_epochs_and_a_longer_run_extends_a_shorter_one():
    order = batch_order(10, 4, 5, seed=0)
    assert order.shape == (5, 4)
    flat = order.flatten().tolist()
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    assert torch.equal(order, batch_order(10, 4, 5, seed=0))
    assert not torch.equal(order, batch_order(10, 4, 5, seed=1))
    assert torch.equal(batch_order(10, 4, 9, seed=0)[:5], order)


def test_150_steps_of_recall_lower_the_loss():
    result = fit(variant_config("llama"), TaskSpec("recall"), 0, Budget.for_steps(150), compile=False)
    first, last = statistics.mean(result.losses[:10]), statistics.mean(result.losses[-10:])
    assert first > 3.5  # near ln 61 = 4.11 at initialisation
    assert last < first - 0.8, (first, last)
    assert [row["step"] for row in result.test_curve] == [38, 75, 112, 150]
    assert result.test_curve[-1]["val_loss"] < result.test_curve[0]["val_loss"]
    # the dense curve: every 12 steps, the mean training loss of the steps since the last one
    assert [row["step"] for row in result.val_curve] == list(range(12, 150, 12)) + [150]
    assert result.val_curve[0]["train_loss"] == pytest.approx(statistics.mean(result.losses[:12]))
    assert result.val_curve[-1]["train_loss"] == pytest.approx(statistics.mean(result.losses[144:]))


def test_scaled_budgets_keep_their_checkpoints_inside_the_floor():
    """Budget.for_steps: the full budget for None or its own cap; a smaller cap becomes the
    floor with checkpoints at its quarters and about twelve evaluations before it; a larger
    one keeps the full floor, checkpoints and evaluation interval."""
    full = Budget()
    assert Budget.for_steps(None) == full and Budget.for_steps(full.steps) == full
    for steps in (1, 7, 50, 600, full.min_steps, 2000, 9999):
        b = Budget.for_steps(steps, "fresh")
        floor = min(steps, full.min_steps)
        assert (b.steps, b.min_steps, b.regime) == (steps, floor, "fresh")
        assert b.checkpoints[-1] == floor and len(b.checkpoints) <= 4
        assert all(0 < c <= floor for c in b.checkpoints)
        if floor < full.min_steps:
            assert b.eval_every == max(1, floor // 12)
        else:
            assert (b.eval_every, b.checkpoints) == (full.eval_every, full.checkpoints)
        assert (b.lr, b.clip, b.batch_size, b.n_train) == (full.lr, full.clip, full.batch_size, full.n_train)
    assert Budget.for_steps(50).checkpoints == (12, 25, 38, 50)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        Budget.for_steps(0)


@pytest.mark.parametrize("kwargs, field", [
    ({"steps": 0}, "steps"),
    ({"min_steps": 0}, "min_steps"),
    ({"steps": 1000}, "min_steps"),
    ({"eval_every": 0}, "eval_every"),
    ({"solved_evals": 0}, "solved_evals"),
    ({"solve_at": 1.5}, "solve_at"),
    ({"regime": "streaming"}, "regime"),
    ({"batch_size": -4}, "batch_size"),
    ({"n_train": 0}, "n_train"),
    ({"n_test": 0}, "n_test"),
    ({"steps": 4800.5}, "steps"),
    ({"checkpoints": ()}, "checkpoints"),
    ({"checkpoints": (300, 1300)}, "checkpoints"),
    ({"checkpoints": (0, 1200)}, "checkpoints"),
    ({"checkpoints": (600, 300)}, "checkpoints"),
    ({"checkpoints": (300, 300, 1200)}, "checkpoints"),
])
def test_budget_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"Budget\.{field}\b"):
        Budget(**kwargs)


def test_fit_rejects_a_negative_seed():
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        fit(variant_config("llama"), TaskSpec("recall"), -1, SMALL)


# ------------------------------------------------------------ the stop rule

def scripted_accuracy(monkeypatch, accuracies):
    """Validation accuracy follows `accuracies`, one value per evaluation (test scores 0)."""
    values = iter(accuracies)

    def fake_score(model, task, data):
        return next(values) if len(data) == 17 else 0.0

    monkeypatch.setattr(loop, "score", fake_score)


STOP = Budget(steps=40, min_steps=12, eval_every=4, n_train=64, n_val=17, n_test=8,
              checkpoints=(6, 12), solved_evals=3)


@pytest.mark.parametrize("accuracies, solve, stop", [
    ([0.0] * 10, None, 40),                              # never solved: censored at the cap
    ([0.95] * 10, 4, 12),                                # solved at once: still trains to the floor
    ([0.1, 0.1, 0.1, 0.9, 0.9, 0.9] + [0.0] * 4, 16, 24),  # 0.90 counts; stops after 3 in a row
    ([0.1, 0.95, 0.2, 0.95, 0.95, 0.5, 0.95, 0.95, 0.95, 0.0], 8, 36),  # a dip resets the streak
    ([0.0] * 8 + [0.91, 0.92], 36, 40),                  # solved late: the cap still stops it
])
def test_stop_rule(monkeypatch, accuracies, solve, stop):
    scripted_accuracy(monkeypatch, accuracies)
    result = fit(variant_config("llama"), TaskSpec("addition"), 0, STOP, fast=False)
    assert (result.solve_step, result.stop_step) == (solve, stop)
    assert len(result.losses) == stop and result.val_curve[-1]["step"] == stop
    assert [row["step"] for row in result.val_curve] == list(range(4, stop + 1, 4))
    # the test columns: every checkpoint, then the stop when it is not one of them
    assert [row["step"] for row in result.test_curve] == [6, 12] + ([stop] if stop != 12 else [])


# ------------------------------------------------------------ the data regimes

@pytest.mark.parametrize("task", ["addition", "recall"])
def test_validation_and_test_items_are_the_same_in_both_regimes(task):
    t = make_task(task, 3)
    finite, fresh = t.splits(4000, 200, 200), t.splits(0, 200, 200)
    assert torch.equal(finite.val.ids, fresh.val.ids) and torch.equal(finite.test.ids, fresh.test.ids)


@pytest.mark.parametrize("task", ["addition", "recall"])
def test_fresh_stream_never_repeats_and_never_leaks_held_out_items(task):
    t = make_task(task, 0)
    splits = t.splits(0, 200, 200)
    held = {tuple(r) for d in (splits.val, splits.test) for r in d.ids.tolist()}
    stream = FreshStream(t, (splits.val, splits.test), seed=0)
    rows = [tuple(r) for _ in range(50) for r in stream.batch(64).tolist()]
    assert len(set(rows)) == len(rows) == 3200
    assert not held & set(rows)
    # seeded: the same stream again gives the same items; another seed does not
    again = FreshStream(t, (splits.val, splits.test), seed=0).batch(64)
    assert [tuple(r) for r in again.tolist()] == rows[:64]
    other = FreshStream(t, (splits.val, splits.test), seed=1).batch(64)
    assert [tuple(r) for r in other.tolist()] != rows[:64]


def test_a_leaked_item_is_skipped():
    """Held-out items are refused even when the stream draws them."""
    t = make_task("recall", 0)
    stream = FreshStream(t, (), seed=0)
    first = stream.batch(3)
    blocked = FreshStream(t, (loop.TaskData(first[:1], 1),), seed=0).batch(2)
    assert torch.equal(blocked, first[1:])


def test_regimes_train_on_different_items_from_the_same_start():
    cfg = variant_config("llama")
    finite = fit(cfg, TaskSpec("recall"), 0, SMALL, fast=False)
    fresh = fit(cfg, TaskSpec("recall"), 0, Budget(**{**SMALL.__dict__, "regime": "fresh"}), fast=False)
    assert finite.losses[0] != fresh.losses[0]  # other batches
    assert finite.losses[0] == pytest.approx(fresh.losses[0], abs=0.2)  # the same initial model


# ------------------------------------------------------------ speed path == plain loop

SPEED_CASES = [("llama", "recall", {}), ("abs_pos", "addition", {}), ("untied", "recall", {}),
               ("llama", "recall", {"rope_theta": 100.0}), ("bias", "addition", {})]


# Compiling costs ~30 s per new graph on a cold cache: every case runs the flat-parameter
# path eagerly, and the compiled step is checked on the two graphs that differ most:
# llama's recall graph in make test (test_same_seed_is_bit_identical compiles it too, on
# the same worker), the untied head's in the slow tier.
SPEED_PARAMS = [pytest.param(v, t, o, False, id=f"{v}-{t}{'-theta' if o else ''}-eager")
                for v, t, o in SPEED_CASES] + [
    pytest.param("llama", "recall", {}, True, id="llama-recall-compiled", marks=pytest.mark.compile),
    pytest.param("untied", "recall", {}, True, id="untied-recall-compiled",
                 marks=(pytest.mark.compile, pytest.mark.slow))]


@pytest.mark.parametrize("variant, task, overrides, compiled", SPEED_PARAMS)
def test_speed_path_computes_the_plain_loop(variant, task, overrides, compiled):
    """Flat parameters and one compiled graph of forward, backward, clip and AdamW change
    how the step runs, not what it computes: over 20 steps the losses and weights agree with the plain loop to
    float32 rounding (far below what one skipped clip, a wrong weight decay or a base
    the template ignored would move)."""
    cfg = variant_config(variant, **overrides)
    plain = fit(cfg, TaskSpec(task), 0, SMALL, fast=False)
    fast = fit(cfg, TaskSpec(task), 0, SMALL, compile=compiled)
    assert fast.losses == pytest.approx(plain.losses, rel=1e-4, abs=1e-5)
    ref_state = plain.model.state_dict()
    for name, tensor in fast.model.state_dict().items():
        torch.testing.assert_close(tensor, ref_state[name], rtol=1e-3, atol=2e-5, msg=name)
    # and the comparison can fail: another base is not the same training
    if overrides:
        other = fit(variant_config(variant), TaskSpec(task), 0, SMALL, fast=False)
        assert other.losses[5:] != pytest.approx(plain.losses[5:], rel=1e-4, abs=1e-5)


def test_training_losses_are_fits_first_steps():
    cfg = variant_config("llama")
    assert training_losses(cfg, TaskSpec("addition"), 0, SMALL, 7, fast=False) == \
        fit(cfg, TaskSpec("addition"), 0, SMALL, fast=False).losses[:7]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pruned_forward_is_the_full_forward_on_its_rows(variant):
    """`last=k` computes queries, MLP and head only for the last k positions of the final
    layer; those rows must equal the full forward's (keys and values still see everything)."""
    model = TinyLlama(variant_config(variant, init_std=0.2), seed=0).eval()
    ids = torch.randint(0, 61, (3, 13), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    # the pruned rows go through matrix multiplies of other shapes, which round differently
    # by a few float32 ulps of the largest logit (2e-6 on logits up to 5 on an AVX2 CPU);
    # a wrong row would be off by the logits' own size
    atol = 1e-5 * full.abs().max().item()
    for k in (1, 6, 13):
        torch.testing.assert_close(model(ids, last=k), full[:, -k:], rtol=1e-5, atol=atol)


@pytest.mark.parametrize("task, answer", [("recall", "name"), ("recall", "copy"), ("addition", "name")])
def test_loss_and_score_is_eval_loss_and_score(task, answer):
    """The dense curve's one-forward evaluation of a one-token answer gives what the two
    separate evaluations give; addition (six tokens) still generates."""
    from llamanat_core.train.loop import eval_loss, loss_and_score, score
    spec = TaskSpec(task, answer=answer)
    t = spec.make(0)
    data = t.splits(0, 64, 8).val
    model = fit(variant_config("llama"), spec, 0, SMALL, fast=False).model
    loss, acc = loss_and_score(model, t, data)
    assert loss == pytest.approx(eval_loss(model, data), rel=1e-6)
    assert acc == score(model, t, data)
    if task == "recall":  # a model that answers better scores higher
        sharp = TinyLlama(variant_config("llama", init_std=0.3), seed=1)
        assert loss_and_score(sharp, t, data) != (loss, acc)


def test_the_step_keeps_the_guards_on_its_tensors_and_the_process_state():
    """What `compiled.tensor_and_state_guards` keeps: guards on input tensors and on the process's
    state (grad mode and the like); not guards on the weightless template's parameters,
    nor on constants, modules and names, which the graph key fixes."""
    from collections import namedtuple

    from llamanat_core.train.compiled import STATE_GUARDS, tensor_and_state_guards
    entry = namedtuple("entry", "guard_type value")
    kept = tensor_and_state_guards([
        entry("TENSOR_MATCH", torch.zeros(2)), entry("GRAD_MODE", None),
        entry("GLOBAL_STATE", None), entry("DEFAULT_DEVICE", None),
        entry("TENSOR_MATCH", torch.nn.Parameter(torch.zeros(2))),
        entry("EQUALS_MATCH", 0.001), entry("ID_MATCH", None), entry("TYPE_MATCH", None)])
    assert kept == [True, True, True, True, False, False, False, False]
    assert "TENSOR_MATCH" not in STATE_GUARDS and "EQUALS_MATCH" not in STATE_GUARDS


def test_every_graph_key_compiles_its_own_copy_of_the_step(monkeypatch):
    """The compiled step checks only the guards on its tensors and the process's state
    (`compiled.tensor_and_state_guards`), which cannot tell llama from postnorm: the same
    parameters, the norm in another place. So each (template, answer length, lr, clip)
    compiles its own copy of the step. Traced by dynamo with the eager backend (the
    choice of graph without inductor's 30 s compile), each architecture and each lr
    trains as it does uncompiled; one code object shared under the same guards hands
    postnorm llama's graph."""
    from llamanat_core.train import compiled

    real_compile = torch.compile

    def eager_compile(fn, dynamic, options):
        return real_compile(fn, backend="eager", dynamic=dynamic,
                            options={"guard_filter_fn": options["guard_filter_fn"]})

    monkeypatch.setattr(torch, "compile", eager_compile)
    monkeypatch.setattr(compiled, "_GRAPHS", {})
    data = TaskSpec("recall").make(0).splits(64, 0, 0).train
    batches = [data.ids[i * 16:(i + 1) * 16] for i in range(4)]

    def losses(variant, lr=1e-3, compile=True, step_fn=None):
        step = compiled.FastStep(TinyLlama(variant_config(variant), 0).train(), 1, lr, 1.0, compile=compile)
        if step_fn is not None:
            step.step_fn = step_fn
        with torch_threads(1):  # as fit trains: one thread, bit-identical
            return [step(b).item() for b in batches]

    close = lambda x: pytest.approx(x, rel=1e-5)  # the trace rounds like eager, to float32
    plain = {v: losses(v, compile=False) for v in ("llama", "postnorm")}
    own = {v: losses(v) for v in plain}
    assert own["llama"] == close(plain["llama"]) and own["postnorm"] == close(plain["postnorm"]), (
        f"a copy of the step ran another copy's graph ({pinned('torch', torch.__version__)}): "
        f"dynamo no longer keeps a function's graphs on its code object, which "
        f"compiled.train_step_copy relies on")
    assert own["postnorm"] != close(own["llama"])  # same init, other architecture
    faster = losses("llama", lr=3e-3)
    assert faster == close(losses("llama", lr=3e-3, compile=False)) and faster != close(own["llama"])
    assert len(compiled._GRAPHS) == 3
    # and the check can fail: one code object under the same guards
    shared = eager_compile(compiled.train_step_copy(), False,
                           {"guard_filter_fn": compiled.tensor_and_state_guards})
    assert losses("llama", step_fn=shared) == own["llama"]
    assert losses("postnorm", step_fn=shared) == own["llama"]


def test_flat_adamw_is_torch_adamw():
    """The compiled step's AdamW (weight decay, both moments, bias corrections) is
    torch.optim.AdamW's to float32 rounding over 30 steps of changing gradients; a wrong
    bias correction or decay would move the weights by orders of magnitude more."""
    from llamanat_core.train.compiled import adamw_
    g = torch.Generator().manual_seed(0)
    ref = torch.nn.Parameter(torch.randn(500, generator=g))
    opt = torch.optim.AdamW([ref], lr=1e-2)
    flat = ref.detach().clone()
    m, v, count = torch.zeros_like(flat), torch.zeros_like(flat), torch.zeros(())
    for _ in range(30):
        grad = torch.randn(500, generator=g)
        ref.grad = grad.clone()
        opt.step()
        adamw_(flat, grad, m, v, count, lr=1e-2)
    assert count.item() == 30
    torch.testing.assert_close(flat, ref.detach(), rtol=1e-5, atol=1e-6)
    assert (flat - torch.randn(500, generator=torch.Generator().manual_seed(0))).abs().max() > 0.1
