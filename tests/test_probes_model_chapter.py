"""The model chapter's probes: the parameter count of each component from a configuration,
the causal mask's fill, the loss levels and the plateaus on constructed curves."""
import math

import pandas as pd
import pytest

from llamanat_core import REFERENCE, VARIANTS, TinyLlama, variant_config
from llamanat_core.blocks import causal_mask
from llamanat_core.probes import model_chapter as mp


@pytest.mark.parametrize("name", list(VARIANTS))
def test_component_counts_equal_the_built_model(name):
    cfg = variant_config(name)
    assert mp.component_counts(cfg) == dict(TinyLlama(cfg, seed=0).parameter_breakdown())


@pytest.mark.parametrize("changes", [{"norm_position": "none"}, {"mlp": "gelu", "bias": True},
                                     {"norm": "layer", "tie_embeddings": False, "n_kv_heads": 1}])
def test_component_counts_off_the_variant_grid(changes):
    cfg = REFERENCE.replace(**changes)
    assert mp.component_counts(cfg) == dict(TinyLlama(cfg, seed=0).parameter_breakdown())


def test_every_query_sees_itself_and_the_check_can_fail():
    assert all(mp.every_query_sees_itself(q, k) for k in range(1, 20) for q in range(1, k + 1))
    strict = lambda q, k: causal_mask(q, k).tril(diagonal=k - q - 1)  # noqa: E731 (no self)
    assert not mp.every_query_sees_itself(4, 4, mask_fn=strict)


def test_guessing_loss_levels():
    assert mp.guessing_loss(4) == pytest.approx(math.log(4))
    assert mp.guessing_loss(10, 1, 6) == pytest.approx(math.log(10) / 6)
    assert mp.guessing_loss(10, 3, 6) == pytest.approx(0.5 * math.log(10))


def test_plateau_dwell_on_constructed_curves():
    level = 0.4
    rows = []
    for run, vals in (("a", [1.1, 0.41, 0.39, 0.40, 0.2, 0.4]), ("b", [1.1, 0.9, 0.1])):
        for i, v in enumerate(vals):
            rows.append({"run": run, "seed": 0, "regime": "finite", "step": 100 * (i + 1),
                         "val_loss": v, "train_loss": v + (0.03 if i == 2 else 0.0)})
    d = mp.plateau_dwell(pd.DataFrame(rows), level, tol=0.02).set_index("run")
    assert d.loc["a", "evaluations"] == 3 and d.loc["a", "from step"] == 200
    assert d.loc["a", "max |train - val|"] == pytest.approx(0.03)
    assert d.loc["b", "evaluations"] == 0 and math.isnan(d.loc["b", "max |train - val|"])


