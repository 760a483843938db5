"""The model chapter's probes: the configuration sheet and its mapping, the parameter
count from a configuration, the compute rules, the causal mask's fill and the loss levels."""
import math

import pandas as pd
import pytest
import torch

from llamanat_core import REFERENCE, VARIANTS, TinyLlama, variant_config
from llamanat_core.blocks import causal_mask
from llamanat_core.kv import PUBLISHED, llama_parameters
from llamanat_core.probes import model_chapter as mp


def test_the_sheet_mapping_is_the_one_hf_uses():
    """SHEET_TO_CONFIG agrees with `hf.llama_config` field by field, and a swapped entry
    (the two head counts crossed) is caught by the same comparison."""
    from llamanat_core.hf import llama_config

    hf = llama_config(REFERENCE)

    def agrees(mapping):
        return all(mp._hf_value(hf, h) == getattr(REFERENCE, ours) for h, ours in mapping.items())

    assert agrees(mp.SHEET_TO_CONFIG)
    crossed = dict(mp.SHEET_TO_CONFIG, num_attention_heads="n_kv_heads", num_key_value_heads="n_heads")
    assert not agrees(crossed)


def test_the_7b_sheet_is_the_published_7b():
    cfg = mp.sheet_config()
    (m,) = [p for p in PUBLISHED if p.name == "LLaMA-1 7B"]
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff, cfg.max_seq_len) == (
        m.dim, m.n_layers, m.n_heads, m.n_kv_heads, m.intermediate_size, m.context)
    assert cfg.head_dim == m.head_dim == 128 and not cfg.tie_embeddings
    assert sum(mp.component_counts(cfg).values()) == llama_parameters(m)
    table = mp.sheet_table()
    assert list(table.index) == list(mp.LLAMA1_7B_SHEET)
    assert (table["sheet"] == table["as our Config"]).all()
    assert table.loc["hidden_size", "our reference"] == REFERENCE.d_model


@pytest.mark.parametrize("name", list(VARIANTS))
def test_component_counts_equal_the_built_model(name):
    cfg = variant_config(name)
    assert mp.component_counts(cfg) == dict(TinyLlama(cfg, seed=0).parameter_breakdown())


@pytest.mark.parametrize("changes", [{"norm_position": "none"}, {"mlp": "gelu", "bias": True},
                                     {"norm": "layer", "tie_embeddings": False, "n_kv_heads": 1}])
def test_component_counts_off_the_variant_grid(changes):
    cfg = REFERENCE.replace(**changes)
    assert mp.component_counts(cfg) == dict(TinyLlama(cfg, seed=0).parameter_breakdown())


def test_7b_feed_forward_is_about_twice_attention():
    c = mp.component_counts(mp.sheet_config())
    assert c["attention"] == 32 * 4 * 4096 ** 2
    assert c["mlp"] == 32 * 3 * 4096 * 11_008
    assert 1.9 < c["mlp"] / c["attention"] < 2.1
    assert c["embedding"] == c["head"] == 32_000 * 4096


def test_compute_rules():
    assert mp.training_flops(2, 3) == 36 and mp.inference_flops(5) == 10
    assert mp.inference_flops(5, tokens=4) == 40
    n, d = mp.chinchilla_optimal(mp.training_flops(1e9, 20e9))
    assert n == pytest.approx(1e9) and d == pytest.approx(20e9)
    n, d = mp.chinchilla_optimal(6 * 100 * 100, tokens_per_parameter=1)
    assert (n, d) == (pytest.approx(100), pytest.approx(100))
    assert mp.GPT3_TRAINING_TOKENS / mp.GPT3_PARAMETERS == pytest.approx(1.714, abs=1e-3)


def test_a_fully_masked_row_nan_with_minus_inf_uniform_with_finfo_min():
    scores = torch.tensor([[0.3, -1.2, 2.0]])
    none = torch.zeros(1, 3, dtype=torch.bool)
    assert torch.isnan(mp.masked_softmax(scores, none, float("-inf"))).all()
    uniform = mp.masked_softmax(scores, none, torch.finfo(torch.float32).min)
    assert torch.allclose(uniform, torch.full((1, 3), 1 / 3))
    some = torch.tensor([[True, False, True]])
    a = mp.masked_softmax(scores, some, float("-inf"))
    b = mp.masked_softmax(scores, some, torch.finfo(torch.float32).min)
    assert torch.equal(a, b) and a[0, 1] == 0  # with one key allowed, both fills agree


def test_transformers_fills_with_finfo_min():
    assert mp.transformers_fill(torch.float32) == torch.finfo(torch.float32).min
    assert mp.transformers_fill(torch.float16) == torch.finfo(torch.float16).min


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


def test_queried_value_mass_on_a_constructed_summary():
    rows = [{"layer": layer, "head": head, "role": role, "mass": m}
            for layer in (1, 2) for head in (1, 2)
            for role, m in (("queried value", 0.1 * layer * head), ("other values", 0.5))]
    s = mp.queried_value_mass(pd.DataFrame(rows), layer=2)
    assert list(s.index) == [1, 2] and s.tolist() == pytest.approx([0.2, 0.4])
    with pytest.raises(ValueError, match="layer 3"):
        mp.queried_value_mass(pd.DataFrame(rows), layer=3)


def test_column_reading_finds_the_head_that_reads_the_column():
    from llamanat_core.mechanism import ADDITION_SOURCES, CHAIN

    rows = []
    for layer in (1, 2):
        for head in (1, 2):
            for target in CHAIN:
                for source in ADDITION_SOURCES:
                    m = 0.0
                    if (layer, head) == (2, 1) and target == "sum 1" and source == "a units":
                        m = 0.9
                    if (layer, head) == (1, 2) and target == "sum 1" and source == "b tens":
                        m = 0.95  # a wrong column, however strong, is not the column read
                    if (layer, head) == (1, 1) and target == "sum 3":
                        m = 0.3 if source in ("a hundreds", "b hundreds") else 0.0
                    rows.append({"layer": layer, "head": head, "target": target,
                                 "source": source, "mass": m})
    r = mp.column_reading(pd.DataFrame(rows))
    assert r.loc["sum 1", "mass"] == pytest.approx(0.9)
    assert (r.loc["sum 1", "layer"], r.loc["sum 1", "head"]) == (2, 1)
    assert r.loc["sum 3", "mass"] == pytest.approx(0.6) and r.loc["sum 2", "mass"] == 0.0
