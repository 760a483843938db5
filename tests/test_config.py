"""SPEC §3-§4: the frozen Config, its validation, the variants and their exact parameter counts."""
import dataclasses

import pytest

from llamanat_core import EXPECTED_PARAMETERS, REFERENCE, VARIANTS, Config, TinyLlama, variant_config

# The §4 table, typed from the spec so an edit to EXPECTED_PARAMETERS cannot hide a change.
SPEC_TABLE = {
    "llama": 102_528, "layernorm": 102_848, "postnorm": 102_528, "abs_pos": 105_600,
    "gelu_mlp": 102_528, "mha": 110_720, "mqa": 98_432, "untied": 106_432,
}


def test_expected_parameters_is_the_spec_table():
    assert EXPECTED_PARAMETERS == SPEC_TABLE
    assert set(VARIANTS) == set(SPEC_TABLE)


@pytest.mark.parametrize("variant", sorted(SPEC_TABLE))
def test_parameter_count_exact(variant):
    model = TinyLlama(variant_config(variant))
    assert model.num_parameters() == SPEC_TABLE[variant]
    breakdown = model.parameter_breakdown()
    assert sum(breakdown.values()) == model.num_parameters()


def test_reference_count_by_hand():
    # attention: q 64x64 + k,v 2 x 64x32 + o 64x64; SwiGLU 3 x 64x192; two RMSNorm gains of 64
    per_layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 192 + 2 * 64
    total = 61 * 64 + 2 * per_layer + 64  # tied embedding/head counted once, final norm
    assert total == 102_528
    b = TinyLlama(Config()).parameter_breakdown()
    assert b["embedding"] == 61 * 64 and b["head"] == 0 and b["positions"] == 0
    assert b["attention"] == 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64)
    assert b["mlp"] == 2 * 3 * 64 * 192 and b["norms"] == 5 * 64


def test_breakdown_groups_of_the_controls():
    assert TinyLlama(variant_config("untied")).parameter_breakdown()["head"] == 61 * 64
    assert TinyLlama(variant_config("abs_pos")).parameter_breakdown()["positions"] == 48 * 64
    assert TinyLlama(variant_config("layernorm")).parameter_breakdown()["norms"] == 2 * 5 * 64
    assert TinyLlama(variant_config("gelu_mlp")).parameter_breakdown()["mlp"] == 2 * 2 * 64 * 288


def test_each_variant_changes_exactly_one_field():
    names = [f.name for f in dataclasses.fields(Config)]
    for variant, change in VARIANTS.items():
        cfg = variant_config(variant)
        differing = {n for n in names if getattr(cfg, n) != getattr(REFERENCE, n)}
        if variant == "llama":
            assert differing == set() and cfg == REFERENCE
        else:
            assert differing == set(change) and len(differing) == 1, variant


def test_config_is_frozen():
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_heads = 8
    assert cfg.n_heads == 4


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
