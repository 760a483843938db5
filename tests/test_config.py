"""The Config, its validation, the variants, their exact parameter counts, and how a
new variant is registered."""
import dataclasses

import pytest

from llamanat_core import EXPECTED_PARAMETERS, REFERENCE, VARIANTS, Config, TinyLlama, variant_config
from llamanat_core.cli import main
from llamanat_core.model import config as config_module
from llamanat_core.model.config import SIZES, size_config

# The parameter table the book states, typed here so an edit to EXPECTED_PARAMETERS
# cannot hide a change to the model.
PUBLISHED_TABLE = {
    "llama": 102_528, "layernorm": 102_848, "postnorm": 102_528, "abs_pos": 105_600,
    "gelu_mlp": 102_528, "mha": 110_720, "mqa": 98_432, "bias": 103_808, "untied": 106_432,
    "mha_matched": 102_656, "geglu": 102_528, "silu_mlp": 102_528,
}


@pytest.mark.parametrize("variant", sorted(PUBLISHED_TABLE))
def test_parameter_count_exact(variant):
    """The one test of the counts (other tests compare counts, never restate them): the
    built model, the package's table and the book's agree, and the breakdown sums to it."""
    assert set(VARIANTS) == set(EXPECTED_PARAMETERS) == set(PUBLISHED_TABLE)
    model = TinyLlama(variant_config(variant))
    assert model.num_parameters() == EXPECTED_PARAMETERS[variant] == PUBLISHED_TABLE[variant]
    assert sum(model.parameter_breakdown().values()) == model.num_parameters()


def test_reference_breakdown_by_hand():
    # attention: q 64x64 + k,v 2 x 64x32 + o 64x64; SwiGLU 3 x 64x192; two RMSNorm gains of 64
    # per layer, one final norm; the tied embedding is the head, counted once
    b = TinyLlama(Config()).parameter_breakdown()
    assert b["embedding"] == 61 * 64 and b["head"] == 0 and b["positions"] == 0
    assert b["attention"] == 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64)
    assert b["mlp"] == 2 * 3 * 64 * 192 and b["norms"] == 5 * 64


def test_breakdown_groups_of_the_controls():
    assert TinyLlama(variant_config("untied")).parameter_breakdown()["head"] == 61 * 64
    assert TinyLlama(variant_config("abs_pos")).parameter_breakdown()["positions"] == 48 * 64
    assert TinyLlama(variant_config("layernorm")).parameter_breakdown()["norms"] == 2 * 5 * 64
    assert TinyLlama(variant_config("gelu_mlp")).parameter_breakdown()["mlp"] == 2 * 2 * 64 * 288


@pytest.mark.parametrize("size", sorted(SIZES))
def test_each_variant_changes_exactly_one_field(size):
    """At every size; `mha_matched` alone changes two (the heads, and the feed-forward
    width that pays for them)."""
    names = [f.name for f in dataclasses.fields(Config)]
    base = size_config(size)
    for variant in VARIANTS:
        cfg = variant_config(variant, size=size)
        differing = {n for n in names if getattr(cfg, n) != getattr(base, n)}
        if variant == "llama":
            assert differing == set() and cfg == base
        elif variant == "mha_matched":
            assert differing == {"n_kv_heads", "d_ff"} and cfg.n_kv_heads == cfg.n_heads
        else:
            assert len(differing) == 1, (variant, differing)


def test_the_larger_size_doubles_the_width_and_keeps_the_head_shape():
    s, m = size_config("S"), size_config("M")
    widths = ("d_model", "n_heads", "d_ff", "gelu_ff")
    assert all(getattr(m, w) == 2 * getattr(s, w) for w in widths)
    assert m.head_dim == s.head_dim and m.n_rep == s.n_rep
    # width x2: every matrix of the blocks x4, the embedding x2
    ratio = TinyLlama(m).num_parameters() / TinyLlama(s).num_parameters()
    assert 3.9 < ratio < 4.0
    # the controls follow the size: MHA has one KV head per query head, MQA one in all
    assert variant_config("mha", size="M").n_kv_heads == 8 and variant_config("mqa", size="M").n_kv_heads == 1
    assert variant_config("gelu_mlp", size="M").gelu_ff == 576
    with pytest.raises(ValueError, match="unknown size 'L'"):
        variant_config("llama", size="L")


@pytest.mark.parametrize("size", sorted(SIZES))
def test_matched_mha_is_the_nearest_whole_width(size):
    """mha_matched's count is the reference's as nearly as one feed-forward unit allows:
    one unit more or fewer would be further away."""
    base = size_config(size)
    target = TinyLlama(base).num_parameters()
    cfg = variant_config("mha_matched", size=size)
    unit = 3 * base.d_model * base.n_layers  # parameters of one SwiGLU unit in every layer
    gap = TinyLlama(cfg).num_parameters() - target
    assert abs(gap) <= unit / 2
    for d in (-1, 1):
        other = TinyLlama(cfg.replace(d_ff=cfg.d_ff + d)).num_parameters() - target
        assert abs(other) > abs(gap)


def test_the_mlp_controls_swap_the_activation_and_the_gate():
    import torch
    x = torch.randn(3, 64)
    ref, geglu = TinyLlama(REFERENCE, seed=0), TinyLlama(variant_config("geglu"), seed=0)
    gelu, silu = TinyLlama(variant_config("gelu_mlp"), seed=0), TinyLlama(variant_config("silu_mlp"), seed=0)
    m_ref, m_geglu = ref.layers[0].mlp, geglu.layers[0].mlp
    # the same weights: GEGLU is SwiGLU with GELU where the SiLU was
    gate, up = m_ref.gate_proj(x), m_ref.up_proj(x)
    assert torch.allclose(m_ref.hidden(x), torch.nn.functional.silu(gate) * up)
    assert torch.allclose(m_geglu.hidden(x), torch.nn.functional.gelu(gate) * up)
    assert not torch.allclose(m_geglu.hidden(x), m_ref.hidden(x))
    h = gelu.layers[0].mlp.up_proj(x)
    assert torch.allclose(silu.layers[0].mlp.hidden(x), torch.nn.functional.silu(h))
    assert torch.allclose(gelu.layers[0].mlp.hidden(x), torch.nn.functional.gelu(h))


def test_bias_control_adds_one_bias_per_output_and_starts_at_zero():
    # q 64 + k, v 32 each + o 64; gate, up 192 each + down 64; two layers
    assert PUBLISHED_TABLE["bias"] - PUBLISHED_TABLE["llama"] == 2 * (64 + 32 + 32 + 64 + 192 + 192 + 64)
    ref, ctl = TinyLlama(REFERENCE, seed=3), TinyLlama(variant_config("bias"), seed=3)
    ref_state = ref.state_dict()
    biases = {k: v for k, v in ctl.state_dict().items() if k.endswith("_proj.bias")}
    assert len(biases) == 2 * 7 and all(not v.any() for v in biases.values())
    # the weights draw the same numbers as the reference: the controls differ in biases only
    assert all(ref_state[k].equal(v) for k, v in ctl.state_dict().items() if k in ref_state)


@pytest.fixture
def registry():
    """Put the variant tables back as they were after a test registers one."""
    saved = (dict(VARIANTS), dict(EXPECTED_PARAMETERS), list(config_module.MATRIX_VARIANTS))
    yield
    for table, old in zip((VARIANTS, EXPECTED_PARAMETERS, config_module.MATRIX_VARIANTS), saved):
        table.clear()
        table.update(old) if isinstance(table, dict) else table.extend(old)


def test_a_registered_variant_trains_and_is_listed(registry, capsys):
    """The documented way to add a control: one register_variant call."""
    from llamanat_core.study import Run, plan
    from llamanat_core.train.loop import Budget, TaskSpec, fit

    config_module.register_variant("wide_ff", {"d_ff": 256}, parameters=102_528 + 2 * 3 * 64 * 64)
    result = fit(variant_config("wide_ff"), TaskSpec("recall"), 0, Budget.for_steps(8), fast=False)
    assert result.model.num_parameters() == 102_528 + 2 * 3 * 64 * 64 and len(result.losses) == 8
    assert main(["params"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wide_ff")]
    assert row and "d_ff=256" in row[0] and "127,104" in row[0]
    assert Run("recall", "wide_ff", 0).variant == "wide_ff"
    assert any(r.variant == "wide_ff" for r in plan(("matrix",), seeds=(0,))["matrix"])


def test_registering_badly_names_the_problem(registry, capsys):
    with pytest.raises(ValueError, match="already registered"):
        config_module.register_variant("llama", {})
    with pytest.raises(ValueError, match="n_head"):
        config_module.register_variant("typo", {"n_head": 8})
    with pytest.raises(ValueError, match="identifier"):
        config_module.register_variant("two words", {})
    config_module.register_variant("miscounted", {"d_ff": 256}, parameters=1)
    assert main(["params"]) == 2  # a count that disagrees with the model is an error
    assert "miscounted" in capsys.readouterr().err


def test_replace_rejects_unknown_field():
    with pytest.raises(ValueError, match="n_head"):
        Config().replace(n_head=8)


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'gpt2'"):
        variant_config("gpt2")


@pytest.mark.parametrize("changes, field", [
    ({"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"),
    ({"n_heads": 6, "n_kv_heads": 4}, "n_kv_heads"),
    ({"head_dim": 15}, "head_dim"),
    ({"d_model": 0}, "d_model"),
    ({"n_layers": -1}, "n_layers"),
    ({"n_heads": 0}, "n_heads"),
    ({"n_kv_heads": 0}, "n_kv_heads"),
    ({"head_dim": 0}, "head_dim"),
    ({"d_ff": -192}, "d_ff"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"max_seq_len": 0}, "max_seq_len"),
    ({"gelu_ff": 0}, "gelu_ff"),
    ({"d_model": 64.0}, "d_model"),
    ({"rope_theta": 0.0}, "rope_theta"),
    ({"norm_eps": -1e-5}, "norm_eps"),
    ({"norm": "batch"}, "norm"),
    ({"norm_position": "sandwich"}, "norm_position"),
    ({"position": "alibi"}, "position"),
    ({"rope_pairing": "quarter"}, "rope_pairing"),
    ({"mlp": "relu"}, "mlp"),
    ({"attention": "flash"}, "attention"),
    ({"bias": 1}, "bias"),
    ({"tie_embeddings": "yes"}, "tie_embeddings"),
])
def test_invalid_config_names_the_field(changes, field):
    with pytest.raises(ValueError, match=rf"Config\.{field}\b"):
        Config(**changes)
    with pytest.raises(ValueError, match=rf"Config\.{field}\b"):
        REFERENCE.replace(**changes)  # replace validates too


def test_valid_edge_settings_are_accepted():
    assert Config(n_heads=4, n_kv_heads=1).n_rep == 4
    assert Config(norm_eps=0.0).norm_eps == 0.0  # the eps-failure demonstration needs eps = 0
    assert Config(norm_position="none").norm_position == "none"
