"""The norm chapter's probes: the centred-vector identity, the eps failure, parameter
counts, and the deep random-weights stack under pre-, post- and no normalisation."""
import math

import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.probes import norm as probe


def test_rms_and_layer_norm_agree_only_on_centred_vectors():
    out = probe.centred_identity(dim=64, seed=3)
    assert abs(out["mean_after"]) < 1e-6
    assert out["centred"] < 1e-5
    assert out["uncentred"] > 0.1  # the control: a shifted vector separates them


def test_hand_check_matches_the_napkin():
    t = probe.hand_check({"a": [3, -1, -1, -1], "b": [4, 0, 0, 0]})
    assert t.loc["b", "RMSNorm"] == "[2.000, 0.000, 0.000, 0.000]"
    assert t.loc["a", "RMSNorm"] == t.loc["a", "LayerNorm"] == t.loc["b", "LayerNorm"]
    assert t.loc["a", "mean square"] == pytest.approx(3.0)


def test_eps_zero_gives_nan_on_a_zero_vector_and_eps_fixes_it():
    t = probe.eps_table(dim=8).set_index(["norm", "eps"])
    for norm in ("RMSNorm", "LayerNorm"):
        assert t.loc[(norm, "0"), "NaN outputs"] == 8
        assert t.loc[(norm, "1e-05"), "NaN outputs"] == 0
        assert t.loc[(norm, "1e-05"), "max |output|"] == 0.0


def test_norm_parameters_per_variant():
    assert probe.norm_parameters(TinyLlama(variant_config("llama"))) == (5, 320)
    assert probe.norm_parameters(TinyLlama(variant_config("layernorm"))) == (5, 640)
    assert probe.norm_parameters(TinyLlama(variant_config("postnorm"))) == (5, 320)


def test_post_norm_pins_the_stream_and_pre_norm_lets_it_grow():
    post, _ = probe.depth_profile("post", seed=0, init_std=0.25, n_layers=6, batch=2)
    assert len(post) == 7  # the embedding and six layers
    assert post.sensitivity[0] == pytest.approx(1.0, rel=1e-4)  # depth 0 is the perturbed input
    assert post.rms[1:].sub(1).abs().max() < 1e-3
    pre, logits = probe.depth_profile("pre", seed=0, init_std=0.25, n_layers=6, batch=2)
    assert pre.rms.is_monotonic_increasing and pre.rms.iloc[-1] > 2 * pre.rms.iloc[1]
    assert math.isfinite(logits) and logits > 1


def test_no_norm_overflows_at_a_large_init_and_is_reported():
    depth, ends = probe.depth_study(("none",), seeds=(0,), init_stds=(0.25,), n_layers=16, batch=2)
    layer = ends.overflow_layer.iloc[0]
    assert layer is not None and 1 <= layer <= 16
    assert depth[depth.layer >= layer].rms.isna().all()
    assert depth[depth.layer < layer].rms.notna().all()
    assert probe.overflow_sentence([layer]).startswith("overflows float32")
    assert probe.overflow_sentence([None, None]) == "stays finite through every layer in all 2 seeds"


def test_depth_profile_is_deterministic():
    torch.manual_seed(123)  # the global RNG must not matter
    a, la = probe.depth_profile("pre", seed=1, n_layers=3, batch=2)
    torch.manual_seed(456)
    b, lb = probe.depth_profile("pre", seed=1, n_layers=3, batch=2)
    assert a.equals(b) and la == lb


def test_spread_formats_every_case():
    assert probe.seed_range_text([1.0, 1.0]) == "1 in every seed"
    assert probe.seed_range_text([1.0, 2.0]) == "1.5 (seeds range 1 to 2)"
    assert probe.seed_range_text([float("nan")] * 3) == "not finite in any of 3 seeds"
    assert probe.seed_range_text([1.0, float("nan")]).endswith("not finite in 1 of 2 seeds")


def test_op_counts_are_the_formulas_counted_by_hand():
    # d = 4 by hand. RMSNorm: 4 squares, 3 adds + 1 divide, eps + rsqrt, 4 scalings, 4 gains
    # = 18 = 4d + 2. LayerNorm: mean 4, subtract 4, squares 4, sum/d 4, eps + rsqrt 2,
    # scale 4, gain 4, bias 4 = 30 = 7d + 2; one reduction against two.
    t = probe.op_totals(4)
    assert t.loc["RMSNorm"].tolist() == [18, 1] and t.loc["LayerNorm"].tolist() == [30, 2]
    t = probe.op_totals(64)
    assert t.loc["RMSNorm", "operations"] == 4 * 64 + 2
    assert t.loc["LayerNorm", "operations"] == 7 * 64 + 2


def test_op_counts_check_the_steps_against_the_modules(monkeypatch):
    """The counted steps must compute the norm: a step list that forgets the bias fails."""
    def no_bias(x, gain, bias, eps):
        y, steps = original(x, gain, bias, eps)
        return y - bias, steps[:-1]

    original = probe._layer_steps
    monkeypatch.setattr(probe, "_layer_steps", no_bias)
    with pytest.raises(AssertionError, match="LayerNorm"):
        probe.op_counts(8)


def test_per_token_ops_counts_norms_and_linear_weights():
    from llamanat_core import Config

    ops = probe.per_token_ops()
    model = TinyLlama(variant_config("llama"))
    assert ops["n_norms"] == 5 and ops["norms"] == 5 * (4 * 64 + 2)
    assert ops["linear"] == 2 * (model.num_parameters() - 320)  # every weight but the norm gains
    assert probe.per_token_ops(Config(norm="layer"))["norms"] == 5 * (7 * 64 + 2)


def test_layer_norm_returns_its_bias_on_a_constant_vector_and_rms_norm_keeps_the_direction():
    t = probe.constant_table(dim=16, values=(-2.0, 3.0))
    const = t.iloc[:2]
    assert (const["max |LayerNorm(x) − b|"] == 0).all()
    assert (const["cos(RMSNorm(x), x)"] > 0.999).all()
    assert t.loc["-2 · 1", "RMSNorm(x), first entries"].startswith("[-1.000")
    jitter = t.iloc[-1]  # nearly constant: LayerNorm blows the jitter up to unit size
    assert jitter["RMS of LayerNorm(x) − b"] > 0.5 and abs(jitter["cos(LayerNorm(x) − b, x)"]) < 0.2


def test_post_norm_first_attention_reads_the_raw_embedding():
    assert probe.attention_input_rms("pre") == pytest.approx(1.0, abs=0.05)
    assert probe.attention_input_rms("post") == pytest.approx(0.02, rel=0.1)  # the init std
