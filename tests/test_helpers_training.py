"""The training chapter's probes: LLaMA-1's schedule through the package's one schedule
and `loop.PlainStep`, and the toy run's record."""
import math

import pytest
import torch

from llamanat_core import REFERENCE, TinyLlama
from llamanat_core.book.helpers import training as tp
from llamanat_core.data.tasks import Recall
from llamanat_core.train.loop import PlainStep


def _batches(n: int = 4):
    train = Recall(seed=0, n_pairs=4).splits(n_train=64 * n, n_val=0, n_test=0).train
    return train, [train.ids[i:i + 64] for i in range(0, 64 * n, 64)]


def test_the_paper_schedule_drives_the_plain_step_and_the_record_shows_the_rate_each_step_used():
    train, batches = _batches()
    batches = batches * 5  # 20 steps
    step = PlainStep(TinyLlama(REFERENCE, seed=0), train.answer_len, tp.paper_schedule(1e-3, 20, warmup=4),
                     clip=1.0)
    step.opt = tp.paper_optimizer(step.model.parameters(), 1e-3)
    record = tp.toy_run(step, batches)
    assert record.lr.iloc[0] == pytest.approx(1e-3 / 4)
    assert record.lr.idxmax() == 4 and record.lr.max() == pytest.approx(1e-3)
    assert record.lr.iloc[-1] == pytest.approx(1e-4)
    assert step.opt.param_groups[0]["betas"] == tp.LLAMA1_BETAS


def test_the_paper_schedule_uses_the_papers_warmup_by_default_and_rejects_a_bad_one():
    schedule = tp.paper_schedule(1.0, 10_000)
    assert schedule(tp.LLAMA1_WARMUP_STEPS) == 1.0 and schedule(tp.LLAMA1_WARMUP_STEPS - 1) < 1.0
    assert schedule(10_000) == pytest.approx(tp.LLAMA1_FINAL_LR_FRACTION)
    with pytest.raises(ValueError, match="warmup"):
        tp.paper_schedule(1.0, 100)  # 2,000 warm-up steps do not fit in 100


def test_toy_run_records_every_step_and_the_loss_falls():
    torch.manual_seed(0)
    train, batches = _batches()
    step = PlainStep(TinyLlama(REFERENCE, seed=0), train.answer_len, lr=1e-3, clip=1.0)
    record = tp.toy_run(step, batches * 3)
    assert list(record.index) == list(range(1, 13))
    assert (record.lr == 1e-3).all()
    assert record.loss.iloc[0] == pytest.approx(math.log(REFERENCE.vocab_size), abs=0.1)
    assert record.loss.iloc[-1] < record.loss.iloc[0]


def test_solved_counts_per_task_and_regime_at_the_study_settings():
    import pandas as pd

    def run(task, regime, censored, variant="llama", answer="name", theta=10_000.0):
        return {"task": task, "regime": regime, "variant": variant, "answer": answer, "rope_theta": theta,
                "censored": censored}
    runs = pd.DataFrame([run("recall", "finite", False), run("recall", "finite", True),
                         run("recall", "fresh", True), run("addition", "finite", False),
                         run("recall", "finite", False, variant="mqa"),  # another variant
                         run("recall", "finite", False, answer="copy"),  # the alphabet's formulation
                         run("recall", "finite", False, theta=100.0)])   # the sweep's base
    counts = tp.solved_counts(runs)
    assert counts.to_dict("index") == {("addition", "finite"): {"solved": 1, "runs": 1},
                                       ("recall", "finite"): {"solved": 1, "runs": 2},
                                       ("recall", "fresh"): {"solved": 0, "runs": 1}}
    assert tp.solved_counts(runs, "mqa").loc[("recall", "finite"), "solved"] == 1
