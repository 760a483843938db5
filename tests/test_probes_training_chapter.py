"""The training chapter's probes: LLaMA-1's schedule built from torch's schedulers, and
the toy run's record."""
import math

import pytest
import torch

from llamanat_core import REFERENCE, TinyLlama
from llamanat_core.probes import training_chapter as tp
from llamanat_core.tasks import Recall
from llamanat_core.train import PlainStep


def test_warmup_then_cosine_reaches_the_peak_then_a_tenth_of_it():
    opt = tp.paper_optimizer([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched = tp.warmup_cosine(opt, warmup=4, total=20)
    lrs = []
    for _ in range(20):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    lrs.append(opt.param_groups[0]["lr"])
    assert lrs[0] == pytest.approx(1e-3 / 4)
    assert max(lrs) == pytest.approx(1e-3) and lrs.index(max(lrs)) == 4
    assert lrs[-1] == pytest.approx(1e-4)
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:]))
    assert opt.param_groups[0]["betas"] == tp.LLAMA1_BETAS


def test_toy_run_records_every_step_and_the_loss_falls():
    torch.manual_seed(0)
    model = TinyLlama(REFERENCE, seed=0)
    train = Recall(seed=0, n_pairs=4).splits(n_train=256, n_val=0, n_test=0).train
    step = PlainStep(model, train.answer_len, lr=1e-3, clip=1.0)
    record = tp.toy_run(step, [train.ids[i:i + 64] for i in range(0, 256, 64)] * 3)
    assert list(record.index) == list(range(1, 13))
    assert record.loss.iloc[0] == pytest.approx(math.log(REFERENCE.vocab_size), abs=0.1)
    assert record.loss.iloc[-1] < record.loss.iloc[0]
