"""The model chapter's probes: the parameter count of each component from a configuration,
the causal mask's fill, the loss levels and the plateaus on constructed curves."""
import math

import pandas as pd
import pytest
import torch

from llamanat_core import REFERENCE, VARIANTS, TinyLlama, variant_config
from llamanat_core.book.helpers import model as mp
from llamanat_core.model.blocks import causal_mask


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


# ---------------------------------------------------------------- LLaMA-1's counts and compute

def test_published_counts_are_the_papers_cut_not_rounded():
    table = mp.published_counts()
    assert list(table.index) == ["LLaMA-1 7B", "LLaMA-1 13B", "LLaMA-1 33B", "LLaMA-1 65B"]
    assert table.loc["LLaMA-1 7B", "parameters"] == 6_738_415_616
    assert list(table["FFN hidden (rule)"]) == [11_008, 13_824, 17_920, 22_016]
    assert (table["cut to 0.1B"] == table["paper (B)"]).all()
    # the paper cuts: 65B's count rounds to 65.3, which the paper does not print
    assert round(table.loc["LLaMA-1 65B", "parameters"] / 1e9, 1) == 65.3
    assert mp.paper_billions(65_285_660_672) == 65.2 and mp.paper_billions(6_799_999_999) == 6.7


def test_compute_rules_on_round_numbers():
    assert mp.training_flops(2, 3) == 36 and mp.inference_flops(5) == 10
    assert mp.inference_flops(5, tokens=4) == 40 and mp.chinchilla_tokens(7) == 140
    row = mp.compute_table({"m": (1e9, 20e9)}).loc["m"]
    assert row["D/N"] == 20 and row["20N"] == 20e9 and row["N"] == 1e9 and row["D"] == 20e9
    assert row["6ND"] == 1.2e20 and row["2N"] == 2e9
    assert mp.budget_tokens(steps=10, batch_size=4, positions=13) == 520
    assert mp.LLAMA1_TRAINING_TOKENS["LLaMA-1 65B"] / 65.2e9 > 20  # past Chinchilla's ratio


# ---------------------------------------------------------------- attention by hand

def test_attention_for_gives_the_layer_the_hand_q_k_v():
    q = torch.tensor([[2.0, 0, 0, 0], [0, 2, 0, 0], [2, 2, 0, 0]])
    k = torch.tensor([[2.0, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]])
    v = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [1, 1, 1, 1]])
    layer, x = mp.attention_for(q, k, v)
    with torch.no_grad():
        assert torch.equal(layer.q_proj(x)[0], q) and torch.equal(layer.v_proj(x)[0], v)
        out, w = layer(x, return_weights=True)
        e2 = math.exp(2)
        expected = torch.tensor([[1, 0, 0], [1 / (1 + e2), e2 / (1 + e2), 0],
                                 [e2 / (2 * e2 + 1), e2 / (2 * e2 + 1), 1 / (2 * e2 + 1)]])
        torch.testing.assert_close(w[0, 0], expected)
        torch.testing.assert_close(layer(x)[0], expected @ v)
        # the check can fail: without the 1/√D scale row 1 would be 1/(1+e⁴), not 1/(1+e²)
        assert abs(w[0, 0, 1, 0].item() - 1 / (1 + math.exp(4))) > 0.05


def test_a_fully_masked_row_is_nan_with_minus_infinity_and_uniform_with_finfo_min():
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    none = torch.zeros(1, 3, dtype=torch.bool)
    assert torch.isnan(mp.masked_softmax(scores, none, float("-inf"))).all()
    uniform = mp.masked_softmax(scores, none, torch.finfo(torch.float32).min)
    torch.testing.assert_close(uniform, torch.full((1, 3), 1 / 3))
    some = torch.tensor([[True, True, False]])
    assert torch.equal(mp.masked_softmax(scores, some, float("-inf")),
                       mp.masked_softmax(scores, some, torch.finfo(torch.float32).min))


def test_transformers_fills_with_finfo_min():
    assert mp.transformers_fill(torch.float32) == torch.finfo(torch.float32).min
    assert mp.transformers_fill(torch.float16) == torch.finfo(torch.float16).min


def test_split_summary_counts_rows_with_a_solved_and_an_unsolved_seed():
    def runs(variant, accs, step=2000):
        return [{"task": "recall", "regime": "finite", "variant": variant, "seed": s, "step": step,
                 "test_acc": a, "final": True} for s, a in enumerate(accs)]
    rows = runs("llama", [1.0, 0.1]) + runs("mqa", [1.0, 0.99]) + runs("gelu_mlp", [0.2, 0.25])
    early = {**rows[0], "step": 100, "test_acc": 0.0, "final": False}  # not a last checkpoint: ignored
    summary = mp.split_summary(pd.DataFrame(rows + [early]))
    assert summary == {"split": 1, "rows": 3, "step": 2000, "one_step": True}
    assert mp.split_summary(pd.DataFrame(runs("llama", [0.9, 0.5]) + runs("mqa", [0.1], 1500))) == {
        "split": 0, "rows": 2, "step": 2000, "one_step": False}  # 0.5 is not unsolved (above 0.4)
