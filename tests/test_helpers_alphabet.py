"""The alphabet chapter's probes: the two formulations share every prompt, the kinds of
wrong answer, the replayed checkpoints (each its run at 1,200 steps) and the queried mass."""
import torch

from llamanat_core.book.helpers.alphabet import ANSWER_OFFSET, formulation_check
from llamanat_core.data.tasks import Recall
from llamanat_core.train.loop import Budget


def test_formulations_share_prompts_and_differ_by_the_offset():
    budget = Budget(n_train=300, n_val=20, n_test=40)
    t = formulation_check([0, 3], (4, 8), budget)
    assert len(t) == 2 * (3 + 1)  # every split at 4 pairs, the test split at 8
    assert t["identical prompts"].all()
    assert ANSWER_OFFSET == 16 and (t["name − copy answer id"] == ANSWER_OFFSET).all()
    assert (t["copy answer in its prompt"] == t["items"]).all()  # copy: the value is in the context
    assert (t["name answer in its prompt"] == 0).all()  # name: never seen in the input
    assert t.loc[(t.pairs == 4) & (t.split == "train"), "items"].tolist() == [300, 300]


def test_check_would_notice_a_different_prompt(monkeypatch):
    encode = Recall._encode

    def shifted(self, item):  # a copy stream whose prompts differ from name's
        ids = encode(self, item)
        return [ids[1], ids[0]] + ids[2:] if self.answer == "copy" else ids

    monkeypatch.setattr(Recall, "_encode", shifted)
    t = formulation_check([0], (4,), Budget(n_train=50, n_val=10, n_test=10))
    assert not t["identical prompts"].any()
    assert torch.tensor(t["items"].tolist()).sum() == 70


# ---------------------------------------------------------------- what the wrong answers are

def _item(keys, values, probe, answer):
    """One recall item built by hand: (prompt, target)."""
    from llamanat_core.data.tasks import ANSWER0, EQ, KEY0, SEP, VALUE0

    ids = []
    for i, (k, v) in enumerate(zip(keys, values)):
        ids += ([SEP] if i else []) + [KEY0 + k, VALUE0 + v]
    ids += [EQ, KEY0 + keys[probe]]
    target = (ANSWER0 if answer == "name" else VALUE0) + values[probe]
    return ids, target


def test_answer_kinds_by_hand():
    from llamanat_core.book.helpers.alphabet import KINDS, answer_kinds
    from llamanat_core.data.tasks import ANSWER0, KEY0, VALUE0

    for answer, base in (("copy", VALUE0), ("name", ANSWER0)):
        prompt, target = _item([0, 1, 2, 3], [5, 6, 7, 8], 2, answer)  # the answer is value 7
        assert target == base + 7
        predicted = [base + 7, base + 5, base + 9, KEY0 + 2]  # right, other pair, absent, a key
        kinds = answer_kinds(torch.tensor([prompt] * 4), torch.tensor(predicted),
                             torch.tensor([target] * 4), answer)
        assert kinds == list(KINDS)
    # the other formulation's symbol for the right value is not an answer of this one
    prompt, target = _item([0, 1, 2, 3], [5, 6, 7, 8], 2, "name")
    assert answer_kinds(torch.tensor([prompt]), torch.tensor([VALUE0 + 7]), torch.tensor([target]),
                        "name") == ["another token"]


def test_answer_kinds_rejects_a_target_that_is_not_in_the_item():
    import pytest

    from llamanat_core.book.helpers.alphabet import answer_kinds
    from llamanat_core.data.tasks import VALUE0

    prompt, _ = _item([0, 1, 2, 3], [5, 6, 7, 8], 2, "copy")
    with pytest.raises(ValueError, match="not the answer of a value"):
        answer_kinds(torch.tensor([prompt]), torch.tensor([VALUE0 + 7]), torch.tensor([VALUE0 + 9]),
                     "copy")


def test_answer_profile_on_a_model_that_knows_only_the_item():
    """A stand-in model that spreads its logits evenly over the item's values (copy)
    answers with another value of the item 3 times in 4 and puts a quarter on each."""
    from llamanat_core.book.helpers.alphabet import answer_profile
    from llamanat_core.data.tasks import VALUE0, VOCAB_SIZE

    class Uniform(torch.nn.Module):
        def forward(self, ids):
            logits = torch.full((*ids.shape, VOCAB_SIZE), -30.0)
            vals = ids[:, 1::3]
            logits[:, -1].scatter_(1, vals, 0.0)
            return logits

    items = [_item([0, 1, 2, 3], [5, 6, 7, 8], p, "copy") for p in range(4)]
    prompt = torch.tensor([p for p, _ in items])
    target = torch.tensor([t for _, t in items])
    out = answer_profile(Uniform(), prompt, target, "copy")
    assert out["right"] == 1 and out["another value of the item"] == 3  # a tie: argmax takes value 5
    assert out["p right"] == pytest_approx(0.25)
    assert out["p per other value of the item"] == pytest_approx(0.25)
    assert out["p per value not in the item"] < 1e-9 and out["p outside the alphabet"] < 1e-9
    assert int(target[0]) == VALUE0 + 5


def pytest_approx(x):
    import pytest

    return pytest.approx(x, abs=1e-9)


def test_checkpoints_round_trip_and_a_changed_replay_is_caught(tmp_path, monkeypatch):
    """save/load keep every tensor (the tied head stored once); `check_replay` rejects
    losses that differ from the committed run's in the last bit."""
    import json

    import pytest

    from llamanat_core.book.helpers import alphabet
    from llamanat_core.model.model import TinyLlama
    from llamanat_core.study import checkpoints

    run = alphabet.checkpoint_run("llama", "copy", 0)
    model = TinyLlama(run.config, seed=3).eval()
    monkeypatch.setattr(checkpoints, "replay", lambda r, steps=alphabet.CHECKPOINT: (model, [1.0] * steps))
    monkeypatch.setattr(checkpoints, "check_replay", lambda r, losses, cache_dir=None: None)
    checkpoints.save_checkpoint("llama", "copy", 0, weights_dir=tmp_path)
    back = alphabet.load_checkpoint("llama", "copy", 0, weights_dir=tmp_path)
    assert back.lm_head.weight is back.embed_tokens.weight
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
    monkeypatch.undo()

    runs = tmp_path / "study" / "runs"
    runs.mkdir(parents=True)
    losses = [3.0, 2.0, 1.5]
    entry = {"losses": losses[:2], "curve": [{"step": 3, "train_loss": 1.5}]}
    (runs / f"{run.key}.json").write_text(json.dumps(entry))
    checkpoints.check_replay(run, losses, cache_dir=tmp_path / "study")  # the same: passes
    with pytest.raises(ValueError, match="differs from its committed run"):
        checkpoints.check_replay(run, [3.0, 2.0, 1.5000001], cache_dir=tmp_path / "study")
    with pytest.raises(ValueError, match="differs from its committed run"):
        checkpoints.check_replay(run, [3.0, 2.1, 1.5], cache_dir=tmp_path / "study")


def test_every_committed_checkpoint_is_its_runs_at_1200_steps():
    """The chapter's replayed weights: one file per variant x formulation x seed, each
    naming the committed run it replays and the step it stopped at, and nothing else."""
    import json

    from safetensors import safe_open

    from llamanat_core.book.helpers import alphabet
    from llamanat_core.study import SEEDS

    want = {alphabet.checkpoint_path(v, a, s).name: alphabet.checkpoint_run(v, a, s)
            for v in alphabet.CHECKPOINT_VARIANTS for a in alphabet.FORMULATIONS for s in SEEDS}
    have = {p.name for p in alphabet.checkpoint_dir().glob("*.safetensors")}
    assert have == set(want)
    for name, run in want.items():
        with safe_open(str(alphabet.checkpoint_dir() / name), "pt") as f:
            meta = json.loads(f.metadata()["run"])
        assert meta["run"] == run.key and meta["step"] == alphabet.CHECKPOINT, name


def test_every_committed_checkpoint_scores_its_runs_recorded_accuracy():
    """The replayed weights are the study's models, not merely files that name them: each
    scores exactly the test accuracy its committed run recorded at the checkpoint."""
    from llamanat_core.book.helpers import alphabet
    from llamanat_core.data.tasks import Recall
    from llamanat_core.study import SEEDS, load_results
    from llamanat_core.train.loop import score

    res = load_results()
    at = res[(res.measurement == "alphabet") & (res.step == alphabet.CHECKPOINT)].drop_duplicates("run")
    recorded = dict(zip(at.run, at.test_acc))
    for v in alphabet.CHECKPOINT_VARIANTS:
        for a in alphabet.FORMULATIONS:
            for s in SEEDS:
                run = alphabet.checkpoint_run(v, a, s)
                model = alphabet.load_checkpoint(v, a, s)
                task = Recall(s, 4, a)
                b = run.budget
                test = task.splits(b.n_train, b.n_val, b.n_test).test
                assert score(model, task, test) == recorded[run.key], run.label


def test_queried_mass_is_the_best_heads_share_of_the_queried_value():
    from llamanat_core import TinyLlama, variant_config
    from llamanat_core.book.helpers.alphabet import queried_mass
    from llamanat_core.book.mechanism import recall_attention

    model = TinyLlama(variant_config("llama"), seed=0).eval()
    a = recall_attention(model, 0)
    best = queried_mass(model, 0)
    assert 0.0 < best <= 1.0
    assert best == float(a[a.role == "queried value"].mass.max())


def _profile(variant, answer, seed, right, other, absent, p_other=0.2, p_absent=0.01):
    return {"variant": variant, "answer": answer, "seed": seed, "items": right + other + absent,
            "right": right, "another value of the item": other, "a value not in the item": absent,
            "another token": 0,
            "p per other value of the item": p_other, "p per value not in the item": p_absent}


def test_wrong_answer_table_counts_and_shares_by_hand():
    import pandas as pd

    from llamanat_core.book.helpers.alphabet import wrong_answer_table

    profiles = pd.DataFrame([_profile("llama", "copy", 0, 90, 9, 1, p_other=0.1),
                             _profile("llama", "copy", 1, 50, 30, 0, p_other=0.3),
                             _profile("llama", "name", 0, 97, 2, 1)])
    t = wrong_answer_table(profiles, rounded=False)
    assert list(t.index) == [("llama", "copy"), ("llama", "name")]  # in the order met
    assert t.loc[("llama", "copy"), "wrong answers"] == 40
    assert t.loc[("llama", "copy"), "another value of the item (%)"] == 100 * 39 / 40
    assert t.loc[("llama", "name"), "a value not in the item (%)"] == 100 / 3
    assert t.loc[("llama", "copy"), "p per other value of the item"] == pytest_approx(0.2)
    assert wrong_answer_table(profiles).loc[("llama", "name"), "a value not in the item (%)"] == 33.3


def test_replay_matches_flags_a_run_whose_accuracy_differs():
    import pandas as pd

    from llamanat_core.book.helpers.alphabet import replay_matches

    profiles = pd.DataFrame([_profile("llama", "copy", 0, 90, 10, 0), _profile("untied", "name", 3, 1, 3, 0)])
    recorded = pd.DataFrame({"variant": ["untied", "llama"], "answer": ["name", "copy"], "seed": [3, 0],
                             "test_acc": [0.25, 0.9]})
    assert replay_matches(profiles, recorded) == [True, True]
    recorded.loc[0, "test_acc"] = 0.5
    assert replay_matches(profiles, recorded) == [True, False]


def test_checkpoint_profiles_one_row_per_run_with_accuracy_and_lookup():
    from llamanat_core import TinyLlama, variant_config
    from llamanat_core.book.helpers.alphabet import checkpoint_profiles, queried_mass

    models = {}

    def load(variant, answer, seed):
        models[(variant, answer, seed)] = TinyLlama(variant_config(variant), seed=seed).eval()
        return models[(variant, answer, seed)]

    p = checkpoint_profiles([0, 1], ["llama"], ("name", "copy"), load=load)
    assert list(zip(p.variant, p.answer, p.seed)) == [("llama", "name", 0), ("llama", "name", 1),
                                                       ("llama", "copy", 0), ("llama", "copy", 1)]
    assert (p.accuracy == p.right / p["items"]).all() and (p["items"] > 0).all()
    assert p["queried value"].iloc[3] == queried_mass(models[("llama", "copy", 1)], 1)
    assert list(p.columns[-2:]) == ["accuracy", "queried value"]


def test_lookup_figure_places_each_run_by_mass_and_accuracy():
    import matplotlib.pyplot as plt
    import pandas as pd

    from llamanat_core.book.plotting import lookup_figure

    runs = pd.DataFrame({"variant": ["a", "a", "a", "b"], "answer": ["name", "copy", "copy", "name"],
                         "queried value": [0.9, 0.1, 0.5, 0.2], "accuracy": [1.0, 0.25, 0.5, 0.3]})
    fig = lookup_figure(runs, ["a", "b"], {"name": "red", "copy": "blue"}, 1200, chance=0.25)
    left, right = fig.axes[:2]
    assert left.get_title() == "a, at step 1,200" and right.get_title() == "b, at step 1,200"
    assert left.get_ylabel() == "test accuracy (%)"
    name, copy = left.collections[:2]
    assert name.get_offsets().tolist() == [[90.0, 100.0]]
    assert copy.get_offsets().tolist() == [[10.0, 25.0], [50.0, 50.0]]
    assert right.collections[0].get_offsets().tolist() == [[20.0, 30.0]]
    assert len(right.collections[1].get_offsets()) == 0  # no "copy" run of b
    assert any(list(line.get_ydata()) == [25.0, 25.0] for line in left.lines)  # the chance floor
    plt.close(fig)
