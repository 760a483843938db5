"""The tuned text study's recipe and its staged plan: the brackets grow until the best rate
is interior, each stage opens when the one before it has settled, and nothing chooses by
the test half."""
import math
from dataclasses import replace

import pytest

from llamanat_core.model.config import SIZES
from llamanat_core.study import text_recipe as tr
from llamanat_core.study.run import Run


def test_a_bracket_grows_on_the_side_of_the_best_until_it_is_interior():
    assert tr.next_scales({2.0: 1.5, 4.0: 1.4, 8.0: 1.45}) == []
    assert tr.best_scale({2.0: 1.5, 4.0: 1.4, 8.0: 1.45}) == 4.0
    assert tr.next_scales({2.0: 1.3, 4.0: 1.4, 8.0: 1.45}) == [1.0]
    assert tr.next_scales({2.0: 1.5, 4.0: 1.4, 8.0: 1.35}) == [16.0]
    assert tr.best_scale({2.0: 1.5, 4.0: 1.4, 8.0: 1.35}) is None  # not interior yet
    assert tr.next_scales({2.0: 1.4, 4.0: 1.4, 8.0: 1.5}) == [1.0]  # a tie goes to the lower rate
    with pytest.raises(ValueError, match="at least one rate"):
        tr.next_scales({})
    with pytest.raises(ValueError, match="power of two"):
        tr.start_scales(3.0)


def test_the_recipe_decays_matrices_and_scales_warm_up_with_the_steps():
    b = tr.recipe_budget(4.0)
    assert (b.steps, b.decay, b.lr, b.eval_every) == (tr.RECIPE_STEPS, "matrices", 4e-3, tr.EVAL_EVERY)
    assert b.warmup == round(tr.WARMUP_SHARE * tr.RECIPE_STEPS) and b.test_windows is None
    cut = tr.recipe_budget(4.0, steps=40)
    assert (cut.steps, cut.decay, cut.lr, cut.warmup) == (40, "matrices", 4e-3, 2)
    assert cut.test_windows is not None  # a quick look reads the first test windows only


def _loss(run: Run) -> float:
    """A made-up validation loss, convex in log2(rate) with an arm-dependent optimum: at S
    postnorm likes 2, every other arm 8; at M every optimum is one factor of two lower."""
    best = 2.0 if run.variant == "postnorm" else 8.0
    if run.size == "M":
        best /= 2
    return 1.5 + 0.01 * (math.log2(run.lr_scale) - math.log2(best)) ** 2 + 0.001 * run.seed


def _settle(steps=4, planner=tr.tuned_plan):
    """Store every run the plan asks for, again and again, until it asks for nothing new."""
    done: dict[str, Run] = {}
    stored = lambda r: {"endpoints": {"loss_val": _loss(r)}} if r.key in done else None
    rounds = 0
    while True:
        plan = planner(stored, steps=steps)
        new = [r for runs in plan.values() for r in runs if r.key not in done]
        if not new:
            return plan, done, rounds
        done.update((r.key, r) for r in new)
        rounds += 1


def test_the_plan_opens_stage_by_stage_and_settles():
    stored = lambda r: None
    first = tr.tuned_plan(stored, steps=4)
    arms = len(tr.tuned_arms())
    # nothing stored: the S brackets only, three rates around the pilot's best, seeds 0-2
    assert first["tuned"] == [] and first["tuned_common"] == []
    assert len(first["tuned_bracket"]) == arms * 3 * 3
    assert {r.size for r in first["tuned_bracket"]} == {"S"}
    assert {r.lr_scale for r in first["tuned_bracket"]} == set(tr.start_scales(tr.PILOT_BEST_SCALE))
    plan, done, rounds = _settle()
    assert rounds >= 3  # brackets grew, then the best rates, then M
    by = lambda stage, size: [r for r in plan[stage] if r.size == size]
    for size, n_first in (("S", 10), ("M", 5)):
        own = by("tuned", size)
        assert len(own) == arms * n_first
        for r in own:  # every arm at its own (made-up) optimum
            want = (2.0 if r.variant == "postnorm" else 8.0) / (2 if size == "M" else 1)
            assert r.lr_scale == want, r.label
        common = by("tuned_common", size)
        assert len(common) == (arms - 1) * len(tr.COMMON_SEEDS[size])
        assert {r.lr_scale for r in common} == {8.0 / (2 if size == "M" else 1)}
    # M brackets start at each arm's S best: postnorm's grid is centred on 2, not 4
    m_post = {r.lr_scale for r in done.values() if r.size == "M" and r.variant == "postnorm"}
    assert min(m_post) == 0.5 and 2.0 in m_post
    assert all(r.compile and r.budget.decay == "matrices" for r in done.values())
    assert set(SIZES) == {r.size for r in done.values()}


def test_weights_are_kept_for_seeds_0_to_2_at_the_best_rate_only():
    plan, done, _ = _settle()
    for r in plan["tuned"]:
        assert r.keeps_weights == (r.seed in tr.KEPT_SEEDS), r.label
    settled = [r for r in plan["tuned_common"] if r.lr_scale != _best(r)]
    assert settled and not any(r.keeps_weights for r in settled)
    # while a bracket is open, each of its seeds 0-2 keeps weights (the best is not known yet)
    open_runs = tr.tuned_plan(lambda r: None, steps=4)["tuned_bracket"]
    assert all(r.keeps_weights for r in open_runs)


def _best(r: Run) -> float:
    return (2.0 if r.variant == "postnorm" else 8.0) / (2 if r.size == "M" else 1)


def test_the_tuned_runs_have_keys_of_their_own():
    a = tr.tuned_run("llama", (), "S", 4.0, 0)
    assert a.record()["compile"] is True and a.record()["budget"]["decay"] == "matrices"
    b = tr.tuned_run("llama", (), "M", 4.0, 0)
    assert b.record()["size"] == "M" and a.key != b.key
    assert a.key != tr.tuned_run("llama", (), "S", 8.0, 0).key
    assert a.key == tr.tuned_run("llama", (), "S", 4.0, 0, keep=True).key  # keeping is not a number


def test_the_estimate_prices_every_stage_at_both_sizes():
    est = tr.plan_estimate({"S": 40.0, "M": 120.0}, {"S": 10.0, "M": 30.0}, extensions=0)
    assert {r["size"] for r in est["rows"]} == set(SIZES)
    bracket_s = next(r for r in est["rows"] if r["size"] == "S" and r["stage"].startswith("bracket"))
    assert bracket_s["runs"] == len(tr.tuned_arms()) * 3 * 3
    assert math.isclose(est["wall_hours"] * 2, est["cpu_hours"])
    assert bracket_s["seconds"] == pytest.approx(tr.RECIPE_STEPS * 0.040 + 10.0)


def test_the_recipe_is_what_its_pilot_chose():
    """The constants the tuned study runs under are the pilot's record, not a retyping."""
    import json

    from llamanat_core.paths import STUDY_DIR

    pilot = json.loads((STUDY_DIR / "text_recipe_pilot.json").read_text())
    assert tr.RECIPE_STEPS == pilot["chosen_steps"]
    assert tr.PILOT_BEST_SCALE == pilot["best_per_budget"][str(pilot["chosen_steps"])]
    assert tr.WARMUP_SHARE == pilot["warmup_share"]
    chosen = [r for r in pilot["runs"] if r["steps"] == tr.RECIPE_STEPS]
    best = min(chosen, key=lambda r: r["val_loss"])
    assert best["val_loss"] < pilot["four_gram_val_nats"] and best["last_quarter_gain"] < 0.02


def test_the_command_lists_the_open_stage_and_refuses_a_mix(tmp_path, capsys):
    from llamanat_core.cli import main

    assert main(["study", "--only", "tuned", "--list", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"tuned_bracket: {len(tr.tuned_arms()) * 9} runs (0 stored)"
    assert sum(" text tuned " in line for line in out) == len(tr.tuned_arms()) * 9
    assert main(["study", "--only", "tuned", "text", "--list", "--cache-dir", str(tmp_path)]) != 0
    assert "runs the tuned text study on its own" in capsys.readouterr().err


def test_the_plan_and_the_registered_analysis_choose_the_same_rates():
    """The runs trained at an arm's best rate are the ones the registered analysis reads:
    both choose by the mean validation loss over seeds 0-2, ties to the lower rate."""
    import pandas as pd

    from llamanat_core.analysis import text_design

    plan, done, _ = _settle()
    rows = [{"size": r.size, "variant": r.variant, "lr_scale": r.lr_scale, "seed": r.seed,
             "rope_theta": r.config.rope_theta, "loss_val": _loss(r),
             **{k: _loss(r) for k in ("loss_end", "loss_half", "loss_2x", "loss_4x")}}
            for r in done.values()]
    best = text_design.best_rates(text_design.check_frame(pd.DataFrame(rows)))
    own = {(r.size, tr.arm_label(r.variant, r.overrides)): r.lr_scale for r in plan["tuned"]}
    assert len(own) == 2 * len(tr.tuned_arms())
    assert all(best[k] == v for k, v in own.items())


def test_fit_trains_the_tuned_recipe_by_default_and_refuses_text_flags_on_a_puzzle(capsys):
    from llamanat_core.cli import main

    assert main(["fit", "--variant", "llama", "--task", "addition", "--size", "M"]) != 0
    assert "apply to --task text only" in capsys.readouterr().err


def test_the_plan_reads_run_files_without_weights_and_the_runner_still_wants_the_kept_ones(tmp_path):
    """A committed bracket run (seeds 0-2 of an open bracket keep weights) copied into an
    empty cache without its weights: the plan reads its result, so a settled bracket needs
    no weights at its other rates; the runner's own check still counts it as missing, so a
    best rate's kept weights are trained again rather than lost."""
    import shutil

    from llamanat_core.study import STUDY_DIR
    from llamanat_core.study.run_files import load_entry, run_path

    opening = tr.tuned_plan(lambda r: None)["tuned_bracket"]
    run = next(r for r in opening if run_path(STUDY_DIR, r).exists() and r.keeps_weights)
    (tmp_path / "runs").mkdir()
    shutil.copy(run_path(STUDY_DIR, run), run_path(tmp_path, run))
    entry = tr.stored_in(tmp_path)(run)
    assert entry is not None and entry["endpoints"]["loss_val"] > 0
    assert load_entry(tmp_path, run, tmp_path / "weights") is None
    assert tr._weights_missing(run, tmp_path / "weights")
    assert not tr._weights_missing(replace(run, keep_weights=False), tmp_path / "weights")


def test_only_a_settled_best_rate_owes_its_weights(tmp_path):
    """Weights lost with an interrupted session are trained again only at a settled
    bracket's best rate (seeds 0-2), never for an open bracket or another rate."""
    opening = tr.tuned_plan(lambda r: None, steps=4)
    assert all(r.keeps_weights for r in opening["tuned_bracket"])
    assert tr.weights_owed(opening, tmp_path) == []  # open brackets save weights, owe none
    plan, _, _ = _settle()
    owed = tr.weights_owed(plan, tmp_path)
    assert {(r.seed, r.lr_scale == _best(r)) for r in owed} == {(s, True) for s in tr.KEPT_SEEDS}
    assert len(owed) == len(tr.tuned_arms()) * len(SIZES) * len(tr.KEPT_SEEDS)
    from llamanat_core.study.weights import weights_path

    kept = weights_path(owed[0], tmp_path)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(b"present")
    still = tr.weights_owed(plan, tmp_path)
    assert owed[0] not in still and len(still) == len(owed) - 1


def test_the_runner_trains_owed_weights_before_the_next_runs(tmp_path, monkeypatch):
    """A settled plan with two runs not stored yet and every best-rate weight missing: the
    runner's first batch is exactly the owed weights, its second the two runs."""
    from llamanat_core.study.plan import unique_runs
    from llamanat_core.study.weights import weights_path

    plan, done, _ = _settle()
    held_back = {r.key for r in plan["tuned"] if r.seed >= 3}
    held_back = set(sorted(held_back)[:2])
    stored = lambda r: ({"endpoints": {"loss_val": _loss(r)}} if r.key in done and r.key not in held_back
                        else None)
    owed = tr.weights_owed(plan, tmp_path / "w")
    batches = []

    def fake_run_study(runs, cache_dir, workers, weights_dir, **_):
        batches.append(runs)
        if len(batches) > 1:
            raise StopIteration  # enough: the second batch is what this test reads
        for r in runs:  # the owed weights now exist
            path = weights_path(r, weights_dir)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"kept")

    monkeypatch.setattr(tr, "run_study", fake_run_study)
    monkeypatch.setattr(tr, "stored_in", lambda cache_dir: stored)
    monkeypatch.setattr(tr, "write_tuned_summary", lambda *a, **k: plan)
    with pytest.raises(StopIteration):
        tr.run_tuned(tmp_path, weights_dir=tmp_path / "w", progress=False)
    assert owed and [r.key for r in batches[0]] == [r.key for r in unique_runs({"owed": owed})]
    assert {r.key for r in batches[1]} == held_back
    assert [r.key for r in batches[1]] == [r.key for r in tr.training_order(plan, stored)]
    assert {r.key for r in unique_runs(plan) if stored(r) is None} == held_back


def test_the_training_order_puts_the_verdicts_seeds_first():
    """Half-way through: every unstored run once; at S, the own-rate stage-one seeds, then
    the open brackets, then the added seeds; then M in the same order; the reference-rate
    runs last."""
    plan, done, _ = _settle()
    plan = tr.tuned_plan(lambda r: {"endpoints": {"loss_val": _loss(r)}} if r.key in done else None,
                         steps=4, added_seeds={"S": {"mha": tuple(range(10, 40))}, "M": {"mqa": (5, 6)}})
    keys = sorted(done)[::2]  # every other run stored
    stored = lambda r: {"endpoints": {"loss_val": _loss(r)}} if r.key in keys else None
    from llamanat_core.study.plan import unique_runs

    order = tr.training_order(plan, stored)
    assert sorted(r.key for r in order) == sorted(r.key for r in unique_runs(plan) if stored(r) is None)
    tiers = []
    for size, n_first in (("S", 10), ("M", 5)):
        own = [r for r in plan["tuned"] if r.size == size]
        tiers += [[r for r in own if r.seed < n_first], [r for r in plan["tuned_bracket"] if r.size == size],
                  [r for r in own if r.seed >= n_first]]
    assert [len(t) for t in (tiers[2], tiers[5])] == [30, 2]  # the added seeds
    tiers.append(plan["tuned_common"])
    tier = {}
    for rank, runs in enumerate(tiers):
        for r in runs:
            tier.setdefault(r.key, rank)
    ranks = [tier[r.key] for r in order]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(tiers)


def test_the_summary_of_a_study_in_progress_reads_every_stored_run(tmp_path):
    """The runner writes the summary after each stage: two committed runs of an open
    bracket copied into an empty cache give a two-row frame with its size, which the
    rate table and the registered analysis read."""
    import shutil

    from llamanat_core.study import STUDY_DIR, load_tuned_results
    from llamanat_core.study.run_files import run_path

    bracket = tr.tuned_plan(lambda r: None)["tuned_bracket"]
    opening = [r for r in bracket if run_path(STUDY_DIR, r).exists()][:2]
    assert len(opening) == 2
    (tmp_path / "runs").mkdir()
    for r in opening:
        shutil.copy(run_path(STUDY_DIR, r), run_path(tmp_path, r))
    tr.write_tuned_summary(tmp_path)
    runs = load_tuned_results(tmp_path)
    assert len(runs) == 2 and set(runs["size"]) == {"S"} and set(runs.run) == {r.key for r in opening}
    assert (runs.loss_val > 0).all()


def _end_loss(r: Run) -> float:
    """A made-up test loss: postnorm worse by 0.05 on every seed (stage one decides it),
    MHA ahead on odd seeds and behind on even ones (stage one cannot), every other arm
    level with the reference."""
    shift = {"postnorm": 0.05, "mha": 0.02 if r.seed % 2 == 0 else -0.015}.get(r.variant, 0.0)
    return 1.4 + 0.001 * r.seed + shift


def test_the_plan_adds_the_seeds_the_registered_rule_asks_for(monkeypatch):
    """Stage one at S stops postnorm (decided) and the level arms (equivalent) and sends
    MHA on: MHA and the reference, each at its own best rate, get seeds 10-39 and nothing
    else does. At M five seeds can stop nothing, so every arm gets seeds 5-9 there."""
    import pandas as pd

    from llamanat_core.analysis import two_stage

    def fake_frame(runs, entries):
        return pd.DataFrame([{"size": r.size, "variant": r.variant, "lr_scale": r.lr_scale, "seed": r.seed,
                              "rope_theta": r.config.rope_theta, "loss_val": _loss(r),
                              **{k: _end_loss(r) for k in ("loss_end", "loss_half", "loss_2x", "loss_4x")}}
                             for r in runs])

    monkeypatch.setattr(two_stage, "frame", fake_frame)
    plain, _, _ = _settle()
    plan, done, _ = _settle(planner=two_stage.tuned_study_plan)
    extra = {r.key: r for r in plan["tuned"]}.keys() - {r.key for r in plain["tuned"]}
    added = [r for r in plan["tuned"] if r.key in extra]
    at_s = {(r.variant, r.lr_scale) for r in added if r.size == "S"}
    assert at_s == {("llama", 8.0), ("mha", 8.0)}  # each at its own best rate
    for variant in ("llama", "mha"):
        assert sorted(r.seed for r in added if r.size == "S" and r.variant == variant) == list(range(10, 40))
    at_m = [r for r in added if r.size == "M"]
    assert {tr.arm_label(r.variant, r.overrides) for r in at_m} == {tr.arm_label(*a) for a in tr.tuned_arms()}
    assert {r.seed for r in at_m} == set(range(5, 10))
    assert not any(r.keeps_weights for r in added)  # weights stay with seeds 0-2
    assert two_stage.tuned_added_seeds(plan, lambda r: None) == {}  # nothing stored, nothing added


def test_time_left_counts_the_unstored_runs_at_the_stored_median():
    plan, done, _ = _settle()
    s_runs = sorted(r.key for r in done.values() if r.size == "S")
    kept = set(s_runs[:3])  # three S runs stored, of 100, 200 and 400 seconds
    seconds = dict(zip(sorted(kept), (100.0, 200.0, 400.0)))
    stored = lambda r: {"seconds": seconds[r.key]} if r.key in kept else None
    left = tr.time_left(plan, stored, workers=2)
    from llamanat_core.study.plan import unique_runs

    n_s = sum(r.size == "S" for r in unique_runs(plan))
    assert left["S"] == {"left": n_s - 3, "median_seconds": 200.0, "hours": (n_s - 3) * 200.0 / 2 / 3600}
    assert left["M"]["median_seconds"] is None and left["M"]["hours"] is None and left["M"]["left"] > 0


def test_the_list_says_what_is_left(tmp_path, capsys):
    from llamanat_core.cli import main

    assert main(["study", "--only", "tuned", "--list", "--cache-dir", str(tmp_path), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    n = len(tr.tuned_arms()) * 9
    assert f"S: {n} runs left, no run stored yet to time" in err and "2 worker(s)" in err
