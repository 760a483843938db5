"""The alphabet chapter's data check: the two formulations share every prompt."""
import torch

from llamanat_core.probes.alphabet import ANSWER_OFFSET, formulation_check
from llamanat_core.tasks import Recall
from llamanat_core.train import Budget


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
