"""The one learning-rate schedule: warm-up to the peak, a cosine to a fraction of it, and
the text study's budget on the same curve."""
import math

import pytest

from llamanat_core.train.schedule import warmup_cosine
from llamanat_core.train.text import TextBudget


def test_the_rate_climbs_to_the_peak_at_the_last_warmup_step_then_falls_to_the_final_fraction():
    rates = [warmup_cosine(s, 1e-3, 4, 20, 0.1) for s in range(1, 21)]
    assert rates[:4] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert max(rates) == rates[3]
    assert rates[-1] == pytest.approx(1e-4)
    assert all(a > b for a, b in zip(rates[3:], rates[4:]))  # strictly down after the peak
    half = 4 + (20 - 4) // 2  # half way along the cosine: half way between peak and floor
    assert rates[half - 1] == pytest.approx(0.55e-3)


def test_no_warmup_starts_on_the_cosine():
    assert warmup_cosine(1, 1.0, 0, 10, 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 10)))


def test_the_text_budget_follows_the_same_curve_bit_for_bit():
    budget = TextBudget()
    ours = [warmup_cosine(s, budget.lr, budget.warmup, budget.steps, budget.final_lr)
            for s in range(1, budget.steps + 1)]
    assert ours == [budget.lr_at(s) for s in range(1, budget.steps + 1)]
    # an off-by-one in the cosine (progress from step - warmup - 1) would be caught
    shifted = [budget.lr * (budget.final_lr + (1 - budget.final_lr) * 0.5 * (1 + math.cos(
        math.pi * (s - budget.warmup - 1) / (budget.steps - budget.warmup))))
        for s in range(budget.warmup + 1, budget.steps + 1)]
    assert shifted != ours[budget.warmup:]


@pytest.mark.parametrize("kwargs, field", [
    ({"warmup": 20}, "warmup"), ({"warmup": -1}, "warmup"),
    ({"step": 0}, "step"), ({"step": 21}, "step")])
def test_bad_input_names_the_parameter(kwargs, field):
    args = {"step": 1, "peak": 1e-3, "warmup": 4, "steps": 20, "final": 0.1} | kwargs
    with pytest.raises(ValueError, match=field):
        warmup_cosine(**args)
