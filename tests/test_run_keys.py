"""The one run record keeps every committed key: each run file of the committed study is
rebuilt, record for record, from the plans' `Run`s (puzzles, text, the learning-rate
check, the added seeds), and a sample of keys is pinned by value. A field that does not
apply to a run's task is a ValueError naming it."""
from __future__ import annotations

import json

import pytest

from llamanat_core.analysis import two_stage
from llamanat_core.study import STUDY_DIR, Run, text_recipe, unique_runs
from llamanat_core.study.results import frame
from llamanat_core.study.run import record_key, run_from_record
from llamanat_core.study.text_plan import keep_seeds, text_plan, text_run
from llamanat_core.study.weights import weights_path
from llamanat_core.train.loop import Budget
from llamanat_core.train.text import TextBudget

# Keys as the committed run files are named, each with the run that must hash to it.
PINNED = {
    "8c43239000da1ed5": Run("recall", "llama", 0),
    "6a092e62eea07e17": Run("addition", "mqa", 3, budget=Budget(regime="fresh")),
    "42ae1a9d4efb288e": Run("recall", "llama", 2, (("rope_theta", 100.0),)),
    "9ae0d925490674dc": Run("recall", "untied", 4, answer="copy"),
    "9a253149aeedb75e": Run("addition", "llama", 10),  # an added seed
    "1ffc11eb80a3f2c9": text_run("llama", 0),
    "b2ea0e8f3284ed7b": text_run("gelu_mlp", 1, lr_scale=2.0),
    "a5302658b84ecaa5": text_run("llama", 2, (("rope_theta", 10.0),), lr_scale=0.5),
    "baa70c0ab41c5c9c": text_run("bias", 10),  # an added text seed
}


def test_pinned_keys_are_the_committed_files_names():
    for key, run in PINNED.items():
        assert run.key == key, run.label
        assert (STUDY_DIR / "runs" / f"{key}.json").exists()


def test_a_text_field_at_its_old_default_stays_out_of_the_record():
    """The keys hold because `size` and `compile` are left out at S and eager: writing them
    always (a plausible mistake) would rename every committed text run."""
    run = text_run("llama", 0)
    record = run.record()
    assert "size" not in record and "compile" not in record
    assert record_key({**record, "size": "S"}) != run.key
    assert record_key({**record, "compile": False}) != run.key
    assert Run("text", "llama", 0, compile=True).record()["compile"] is True
    assert Run("text", "llama", 0, compile=True).key != run.key


def test_every_committed_run_file_is_rebuilt_from_the_plans():
    stored = text_recipe.stored_in(STUDY_DIR)
    planned = unique_runs(two_stage.study_plan(train_added=True)) + \
        unique_runs(two_stage.text_study_plan(train_added=True)) + \
        unique_runs(two_stage.tuned_study_plan(stored))
    by_key = {r.key: r for r in planned}
    files = sorted((STUDY_DIR / "runs").glob("*.json"))
    kinds = set()
    for path in files:
        stored = json.loads(path.read_text())["record"]
        assert path.stem in by_key, f"{path.name} is no run of the plans"
        run = by_key[path.stem]
        assert run.record() == stored, run.label
        assert run_from_record(stored) == run  # and the record gives the run back (verify's way)
        kinds.add((run.task == "text", run.seed >= 10, run.lr_scale not in (None, 1.0)))
    # puzzles and text, first ten and added seeds, and the learning-rate check all occur
    assert {(False, False, False), (False, True, False), (True, False, False), (True, True, False),
            (True, False, True)} <= kinds
    assert len(files) > 1000


@pytest.mark.parametrize("task, field, value", [
    ("recall", "lr_scale", 1.0), ("addition", "size", "S"), ("text", "answer", "copy"),
    ("text", "budget", Budget()), ("recall", "budget", TextBudget()), ("text", "size", "XL"),
    ("text", "lr_scale", -1.0), ("sorting", "task", None)])
def test_a_field_that_does_not_apply_is_refused_by_name(task, field, value):
    kwargs = {} if field == "task" else {field: value}
    with pytest.raises(ValueError, match=field):
        Run(task, "llama", 0, **kwargs)


def test_the_next_text_study_s_fields_enter_the_record_only_where_they_change_a_run():
    base = text_run("mha", 0)
    bigger = text_run("mha", 0, size="M", compile=True, decay="matrices")
    record = bigger.record()
    assert (record["size"], record["compile"], record["budget"]["decay"]) == ("M", True, "matrices")
    cfg = bigger.config
    assert cfg.d_model == 2 * base.config.d_model and cfg.vocab_size == base.config.vocab_size
    assert cfg.n_kv_heads == cfg.n_heads  # mha at size M: its change is a function of the size
    others = (text_run("mha", 0, size="M"), text_run("mha", 0, compile=True))
    assert len({base.key, bigger.key, *(r.key for r in others)}) == 4
    assert weights_path(bigger).name != weights_path(Run("text", "mha", 0, size="S", compile=True,
                                                         budget=bigger.budget)).name
    assert run_from_record(record) == bigger
    with pytest.raises(ValueError, match="not one a run writes"):
        run_from_record({**record, "size": "S"})  # a size written at its default is no run's record


def test_which_text_runs_keep_weights_is_the_plan_s_choice():
    default = text_plan(("text",), seeds=(0, 1, 2, 3))["text"]
    assert {(r.variant, r.overrides, r.seed) for r in default if r.keeps_weights} == \
        {("llama", (), 0), ("abs_pos", (), 0)}
    wide = text_plan(seeds=(0, 1, 2, 3), lr_seeds=(0,), sizes=("S", "M"), keep=keep_seeds((0, 1, 2)))
    kept = [r for runs in wide.values() for r in runs if r.keeps_weights]
    assert {r.seed for r in kept} == {0, 1, 2} and {r.size for r in kept} == {"S", "M"}
    assert all(r.lr_scale == 1.0 for r in kept) and len({r.key for r in kept}) == 2 * 3 * 11
    assert {r.key for r in default} <= {r.key for r in wide["text"]}


def test_one_frame_holds_text_and_puzzle_rows_a_size_column_only_where_sizes_differ():
    text = [text_run("llama", 0), text_run("llama", 0, size="M")]
    puzzle = Run("addition", "llama", 0)
    entries = {text[0].key: {"params": 1, "endpoints": {"loss_end": 1.5, "loss_2x": None}, "seconds": 2.0},
               text[1].key: {"params": 4, "endpoints": {"loss_end": 1.2, "loss_2x": 1.3}, "seconds": 3.0},
               puzzle.key: {"params": 9, "solve_step": None, "stop_step": 300, "final_loss": 0.5,
                            "curve": [{"step": 300, "test_acc": 0.25}]}}
    assert "size" not in frame(text[:1], entries)
    df = frame([puzzle] + text, entries)
    assert list(df["size"])[1:] == ["S", "M"] and df["size"].isna()[0]
    assert df.lr_scale.isna()[0] and df.task.isna()[1] and df.loss_2x.isna()[1]
    assert list(df.test_acc_8.isna()) == [True] * 3  # the longer-recall columns a puzzle frame has
