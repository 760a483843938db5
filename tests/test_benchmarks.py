"""The benchmarks' arithmetic: the FLOPs the trainer benchmark divides by are the ones the
step does, and the run breakdown counts every call `fit` makes.

`benchmarks/train_step.py` states a floor (matmul FLOPs at a measured rate) and the time
our step spends inside its matrix multiplies (profiled). Both rest on knowing which
matrix multiplies one step makes; here the profiled shapes of a real (eager) step are held
against the benchmark's closed-form count.
"""
import importlib.util
import json
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import ROOT

from llamanat_core.model.config import variant_config
from llamanat_core.model.model import TinyLlama
from llamanat_core.train.compiled import FastStep


def load_benchmark(name: str):
    """A script of benchmarks/ as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_benchmark("train_step")
breakdown_bench = load_benchmark("run_breakdown")
plan_bench = load_benchmark("study_plan")


@pytest.mark.parametrize("task", ["addition", "recall"])
@pytest.mark.parametrize("variant", ["llama", "mqa", "mha"])
def test_profiled_gemms_are_the_counted_ones(task, variant):
    cfg = variant_config(variant)
    data, batches = bench.task_batches(task, n_items=200, batch=8, steps=4)
    t, alen = data.ids.shape[1] - 1, data.answer_len
    step = FastStep(TinyLlama(cfg, 0).train(), alen, 1e-3, 1.0, compile=False)
    _, shapes, _ = bench.gemm_profile(step, batches, steps=3)
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
    ms, shapes, parts = bench.gemm_profile(step, [torch.zeros(4, 1)], steps=6)
    assert shapes == Counter({(4, 5, 3): 1, (4, 5, 2): 1})
    assert bench.gemm_flops(shapes) == 2 * 4 * 5 * 3 + 2 * 4 * 5 * 2
    assert ms > 0 and parts["matrix multiplies"] == ms
    assert parts[bench.OVERHEAD] > 0  # torch.ones, torch.zeros: not a part of the step's math
    assert len(calls) == bench.WARMUP + 6


def test_paired_difference_pairs_each_repeat_in_alternating_order(monkeypatch):
    """On a clock that each call of `a` moves by 3 ms and each of `b` by 1 ms, a is 2 ms
    slower a call in every repeat, whichever runs first (and each repeat runs both)."""
    clock, order = [0.0], []

    def timed(name, ms):
        def fn(_batch):
            order.append(name)
            clock[0] += ms / 1e3
        return fn

    monkeypatch.setattr(bench.time, "thread_time", lambda: clock[0])
    a, b = timed("a", 3.0), timed("b", 1.0)
    assert bench.paired_difference(a, b, [None]) == pytest.approx(2.0)
    assert bench.paired_difference(b, a, [None]) == pytest.approx(-2.0)
    n = bench.STEPS_PER_REPEAT
    firsts = order[:2 * n * bench.PAIRED_REPEATS:2 * n]  # who started each repeat of a - b
    assert firsts[:4] == ["b", "a", "b", "a"] and order.count("a") == order.count("b")


def test_the_fully_guarded_step_is_our_graph(monkeypatch):
    """The benchmark's full-guards step hands the backend the same graph as the compiled step
    (so inductor builds the same kernels, and the time between them is the guards'), and
    trains to the same losses and weights bit for bit. Both are traced by dynamo with a
    recording backend that runs the graph eagerly: the check is the graph, not inductor's
    30 s compile of it (the compiled step itself is checked in test_train)."""
    from llamanat_core.train import compiled

    graphs: dict[str, list[str]] = {"ours": [], "guarded": []}
    real_compile = torch.compile

    def recording_compile(fn, dynamic, options):
        ours = "guard_filter_fn" in options  # only the compiled step's compile filters the guards

        def backend(gm, example_inputs):
            graphs["ours" if ours else "guarded"].append(gm.code)
            return gm.forward

        kept = {"guard_filter_fn": options["guard_filter_fn"]} if ours else {}
        return real_compile(fn, backend=backend, dynamic=dynamic, options=kept)

    monkeypatch.setattr(torch, "compile", recording_compile)
    monkeypatch.setattr(compiled, "_GRAPHS", {})
    cfg = variant_config("llama")
    data, batches = bench.task_batches("recall", steps=5)
    with bench.torch_threads(1):
        ours = FastStep(TinyLlama(cfg, 0).train(), data.answer_len, 1e-3, 1.0, compile=True)
        guarded = bench.fully_guarded(TinyLlama(cfg, 0).train(), data.answer_len)
        assert [ours(b).item() for b in batches] == [guarded(b).item() for b in batches]
    assert torch.equal(ours.params.flat, guarded.params.flat)
    assert len(graphs["ours"]) == len(graphs["guarded"]) == 1  # one graph each, no recompile
    assert graphs["ours"] == graphs["guarded"]
    # and the comparison can fail: another answer length is another graph
    other = FastStep(TinyLlama(cfg, 0).train(), data.answer_len + 1, 1e-3, 1.0, compile=True)
    other(batches[0])
    assert graphs["ours"][1] != graphs["guarded"][0]


@pytest.mark.parametrize("name, part", [
    ("aten::mm", "matrix multiplies"), ("aten::addmm", "matrix multiplies"),
    ("graph_0_cpp_fused__log_softmax__log_softmax_backward_data_arange_clone_eq_exp_9",
     "loss (log-softmax)"),
    ("graph_0_cpp_fused_add_cat_clamp_copy__div_fma_lerp_linalg_vector_norm_mul_pow_28",
     "clipping + AdamW"),
    ("graph_0_cpp_fused__softmax__softmax_backward_data__unsafe_view_add_bitwise_not_16",
     "attention softmax"),
    ("graph_0_cpp_fused__unsafe_view_mul_silu_4", "MLP activation"),
    ("graph_0_cpp_fused__unsafe_view_add_cat_div_embedding_expand_mean_mul_pow_rsqrt_0",
     "norms, RoPE, embedding"),
    ("TorchDynamo Cache Lookup", "calling the graph"),
    ("## Call CompiledFxGraph fylroz5a37 ##", "calling the graph"),
])
def test_step_parts_sort_kernel_names(name, part):
    """Inductor names a fused kernel after what it fuses: the step's parts come from those
    names, the loss's log-softmax before the attention softmax it also spells."""
    assert bench.step_part(name) == part


@pytest.mark.parametrize("task", ["recall", "addition"])
def test_run_breakdown_counts_every_call_fit_makes_once_and_restores_them(task):
    """The breakdown of a short run (eager): one first step and the rest of the steps, one
    validation per evaluation (addition's, a multi-token answer, calls eval_loss and score
    inside it: counted once, as validation), scoring for recall's longer lengths at every
    evaluation plus the test rows at the checkpoints; its parts add up to the run's
    seconds; afterwards `loop` and `compiled` are as they were."""
    from llamanat_core.train import compiled, loop
    from llamanat_core.train.loop import Budget

    before = (loop.loss_and_score, loop.score, loop.eval_loss, compiled.FastStep.__call__)
    run = breakdown_bench.find_run(task, "llama", "finite", 0)
    budget = Budget(steps=20, min_steps=20, eval_every=5, n_train=256, n_val=32, n_test=32,
                    checkpoints=(10, 20))
    t = breakdown_bench.breakdown(run, budget, compile=False)
    assert t["stop_step"] == 20 and t["n_steps"] == 19 and t["first step"] > 0
    assert t["n_validation"] == 4  # steps 5, 10, 15, 20
    lengths = len(run.spec.extrapolate)
    assert lengths == {"recall": 2, "addition": 0}[task]
    # dense: each longer length per evaluation; test rows: loss + test set + each length
    assert t["n_scoring"] == 4 * lengths + 2 * (2 + lengths)
    assert all(t[p] >= 0 for p in breakdown_bench.PARTS)
    assert sum(t[p] for p in breakdown_bench.PARTS) == pytest.approx(t["seconds"])
    assert (loop.loss_and_score, loop.score, loop.eval_loss, compiled.FastStep.__call__) == before
    with pytest.raises(SystemExit, match="no run"):
        breakdown_bench.find_run(task, "llama", "finite", 99)


def test_same_record_ignores_only_the_seconds_and_where_it_ran(tmp_path):
    """Two machines that compute the same bits differ in their kernel build (`env`) and in
    seconds: the files are the same measurement. A changed curve value is not."""
    entry = {"key": "k", "dense": [{"step": 100, "val_acc": 0.5}], "seconds": 10.0,
             "env": {"cpu": "x", "platform": "Linux-6.18.44-fc-v1045-x86_64"}}
    moved = {**entry, "seconds": 12.5, "env": {"cpu": "x", "platform": "Linux-6.18.44-fc-v1147-x86_64"}}
    changed = {**entry, "dense": [{"step": 100, "val_acc": 0.5 + 2 ** -20}]}
    paths = {}
    for name, e in (("a", entry), ("b", moved), ("c", changed)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(e))
    assert plan_bench.same_record(paths["a"], paths["b"])
    assert not plan_bench.same_record(paths["a"], paths["c"])


def test_study_plan_bound_prices_each_tasks_steps_at_its_own_cost(monkeypatch, capsys):
    """`study_plan.py --bound`: each task's recorded steps times that task's step time here,
    summed and spread over the workers (the step costs stand in for the measurement)."""
    costs = {"addition": (2.0, 0.5), "recall": (4.0, 3.0)}  # (ms per step, ms in matrix multiplies)
    monkeypatch.setattr(plan_bench, "step_costs", costs.__getitem__)
    entries = [{"record": {"task": "addition"}, "stop_step": 30_000},
               {"record": {"task": "addition"}, "stop_step": 30_000},
               {"record": {"task": "recall"}, "stop_step": 15_000}]
    plan_bench.bound(entries, workers=2)
    out = capsys.readouterr().out
    assert "addition: 60,000 steps x 2.00 ms here (0.50 ms in matrix multiplies, 25%)" in out
    assert "recall: 15,000 steps x 4.00 ms here (3.00 ms in matrix multiplies, 75%)" in out
    # (60,000 x 2 + 15,000 x 4) ms = 180 s over 2 workers; (30 + 45) s of multiplies over 2
    assert "take 1.5 min at 2 workers here, their matrix multiplies alone 0.6 min" in out


# ------------------------------------------------------------ the design simulation

def test_design_simulation_records_each_interval_beside_its_own_count(tmp_path, monkeypatch, capsys):
    """The file the methods appendix quotes: every rate's 95 % interval is the exact
    binomial interval of that rate's own count (a construction's must not overwrite the
    study's), and what is printed is what is written."""
    import scipy.stats

    design = load_benchmark("sequential_design")
    monkeypatch.setattr(design, "OUT", tmp_path / "design.json")
    assert design.main(["--families", "3", "--intervals", "3", "--constructions", "--write"]) == 0
    rec = json.loads((tmp_path / "design.json").read_text())

    def exact(k, n):
        return list(scipy.stats.binomtest(k, n).proportion_ci(method="exact"))

    assert rec["intervals"] == 3 and 0 <= rec["covered"] <= 3
    assert rec["coverage_ci"] == pytest.approx(exact(rec["covered"], rec["intervals"]))
    assert rec["false_rate_ci"] == pytest.approx(exact(rec["false_families"], rec["families"]))
    assert set(rec["coverage_by_construction"]) == set(design.CONSTRUCTIONS)
    for built in rec["coverage_by_construction"].values():
        assert built["coverage_ci"] == pytest.approx(exact(built["covered"], built["intervals"]))
    printed = capsys.readouterr().out
    assert f"{rec['covered']} of {rec['intervals']} cover" in printed
    lo, hi = rec["coverage_ci"]
    assert f"[95% CI {lo:.1%}, {hi:.1%}] (nominal 95%)" in printed


def test_each_construction_is_resampled_through_its_own_stage_one_rule(monkeypatch):
    """Nine of ten seeds far above 0 and one just below: the registered rule (sign flips)
    stops, decided; the sign test's rule (9 of 10 is p = 22/1,024) sends the row on. On the
    puzzles each construction branches by its own analysis's rule, so on the same draws the
    two can take different branches; the text study ran the sign test's rule under both."""
    design = load_benchmark("sequential_design")
    nine = np.array([-1] + [500] * 9)
    assert design.registered_branch(nine, 100) == design.BRANCHES[0]
    assert design.sign_test_branch(nine, 100) == design.BRANCHES[2]
    rules = design.STAGE_ONE_RULES
    assert rules[False] == {
        design.REGISTERED: design.registered_branch,
        design.CORRECTED: design.sign_test_branch,
    }
    assert set(rules[True].values()) == {design.sign_test_branch}
    row = {"comparison": "x", "differences": np.array([3, -2, 5, 1, -4, 2, 0, 6, -1, 2]), "margin": 100}
    seen = {design.REGISTERED: [], design.CORRECTED: []}
    took = {design.REGISTERED: design.BRANCHES[0], design.CORRECTED: design.BRANCHES[2]}
    monkeypatch.setitem(design.STAGE_ONE_RULES, False, {
        name: (lambda f, m, name=name: seen[name].append(len(f)) or took[name]) for name in seen})
    monkeypatch.setattr(design, "text_rows", lambda: [row])
    monkeypatch.setattr("llamanat_core.analysis.comparisons.row_differences", lambda results: [row])
    monkeypatch.setattr("llamanat_core.study.load_results", lambda: None)
    rec = design.resampling(0, 2)
    for name, branch in took.items():
        assert len(seen[name]) == rec["resamples"] and set(seen[name]) == {10}
        assert rec["constructions"][name][branch]["n"] == rec["resamples"]
    assert rec["stage_one_rule"] == {name: "<lambda>" for name in seen}
    assert rec["command"] == "python benchmarks/sequential_design.py --resample 2 --write"


def test_the_text_resampling_reads_the_text_rows_and_writes_its_own_file(tmp_path, monkeypatch):
    """`--resample --text` draws from the text study's own differences, in whole units of
    its endpoint, and writes beside (not over) the puzzles' validation."""
    from llamanat_core.analysis.text_comparisons import TEXT_UNIT, text_differences
    from llamanat_core.study import load_text_results

    design = load_benchmark("sequential_design")
    rows = design.text_rows()
    d = text_differences(load_text_results())
    assert [r["comparison"] for r in rows] == list(dict.fromkeys(d.comparison))
    post = next(r for r in rows if r["comparison"] == "postnorm")
    seeds = d[d.comparison == "postnorm"]
    assert post["differences"].dtype.kind == "i" and post["margin"] == 100
    assert np.array_equal(post["differences"], np.round(seeds.difference / TEXT_UNIT).astype(int))
    monkeypatch.setattr(design, "TEXT_RESAMPLE_OUT", tmp_path / "text.json")
    monkeypatch.setattr(design, "RESAMPLE_OUT", tmp_path / "puzzles.json")
    monkeypatch.setattr(design, "text_rows", lambda: rows[:2])
    assert design.main(["--resample", "1", "--text", "--write"]) == 0
    rec = json.loads((tmp_path / "text.json").read_text())
    assert rec["rows"] == 2 and rec["resamples"] == 2 * len(rec["truths"])
    assert not (tmp_path / "puzzles.json").exists()
