"""The SwiGLU chapter's probes: exact-zero shares, the trained-weight hook, the width rule."""
import math

import pytest
import torch

from llamanat_core import REFERENCE, TinyLlama, variant_config
from llamanat_core.book import mechanism
from llamanat_core.book.helpers import swiglu
from llamanat_core.model.published import PUBLISHED, PublishedModel
from llamanat_core.study import Run, load_weights, weights_path


def test_zero_share_counts_exact_zeros_only():
    h = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 2.0, 0.0])
    assert swiglu.zero_share(h) == 3 / 6
    assert swiglu.negative_share(h) == 1 / 6


def test_relu_switches_off_about_half_and_gelu_swiglu_none():
    t = swiglu.zero_table(seeds=(0, 1), n_tokens=1024)
    relu = t[t.kind == "relu"]
    assert relu.zero.between(0.45, 0.55).all()
    assert (t[t.kind != "relu"].zero == 0).all()
    # ReLU and GELU read the same up projection: GELU is negative exactly where ReLU is zero
    gelu = t[t.kind == "gelu"]
    assert relu.zero.tolist() == gelu.negative.tolist()
    assert (relu.negative == 0).all()
    assert set(zip(t.kind, t.width)) == {("relu", 288), ("gelu", 288), ("swiglu", 192)}


def test_hidden_units_use_the_models_initial_weights():
    x = swiglu.random_batch(8, 64, seed=3)
    mlp = TinyLlama(REFERENCE, seed=2).layers[0].mlp
    expected = torch.nn.functional.silu(mlp.gate_proj(x)) * mlp.up_proj(x)
    assert torch.equal(swiglu.hidden_units("swiglu", x, seed=2), expected)
    with pytest.raises(ValueError, match="kind"):
        swiglu.hidden_units("tanh", x)


def test_trained_hidden_hooks_every_layer_and_position(tmp_path):
    from safetensors.torch import save_file

    model = TinyLlama(REFERENCE, seed=5)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(weights_path(Run("recall", "llama", 0), tmp_path)))
    loaded = load_weights(Run("recall", "llama", 0), tmp_path)
    assert torch.equal(loaded.lm_head.weight, model.embed_tokens.weight)
    ids = torch.randint(0, REFERENCE.vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    out = swiglu.trained_hidden(loaded, ids)
    assert out["hidden"].numel() == REFERENCE.n_layers * 3 * 7 * REFERENCE.d_ff
    assert out["hidden"].dtype == torch.float64  # evaluated in float64 ...
    assert loaded.embed_tokens.weight.dtype == torch.float32  # ... on a copy
    first = loaded.layers[0].mlp  # what the float32 model computes: the same values, rounded
    x = mechanism.call_arguments(loaded, ids, [first])[0][1][0]
    with torch.no_grad():
        h32 = first.hidden(x).flatten()
    assert torch.allclose(out["hidden"][:h32.numel()].float(), h32, rtol=1e-4, atol=1e-6)
    assert not torch.equal(out["hidden"][:h32.numel()], h32.double())  # float64 is not float32
    s = swiglu.gate_summary(out["gate"], out["hidden"])
    assert s["zero"] == 0 and 0.3 < s["gate_negative"] < 0.7 and 0 < s["mass_negative_gate"] < 1


def test_gate_summary_on_hand_values():
    gate = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    hidden = torch.tensor([1.0, 1.0, 2.0, 0.0])
    s = swiglu.gate_summary(gate, hidden)
    assert s == {"zero": 0.25, "gate_negative": 0.5, "mass_negative_gate": 0.75}


def test_width_rule_and_parameter_match():
    assert PUBLISHED[0].ffn_hidden == 11_008
    assert [m.ffn_hidden for m in PUBLISHED[:4]] == [11_008, 13_824, 17_920, 22_016]
    for d in (4096, 5120, 6656, 8192):
        h = PublishedModel("x", d, 1, 1, 1, 1).ffn_hidden
        assert h % 256 == 0 and 0 <= h - 8 * d / 3 < 256
    t = swiglu.width_table()
    assert list(t["hidden (rule)"]) == [11_008, 13_824, 17_920, 22_016]
    assert t.loc["LLaMA-1 7B", "SwiGLU 3·d·hidden"] == 3 * 4096 * 11_008
    assert math.isclose(t.loc["LLaMA-1 7B", "SwiGLU / two-matrix"], 11_008 * 3 / (8 * 4096))
    assert swiglu.width_table(formatted=True).loc["LLaMA-1 7B", "hidden (rule)"] == "11,008"
    assert swiglu.mlp_parameters("llama") == swiglu.mlp_parameters("gelu_mlp") == 36_864
    cfg = variant_config("gelu_mlp")
    assert cfg.gelu_ff * 2 == cfg.d_ff * 3


def test_random_batch_is_not_drawn_from_the_weights_stream():
    """A batch drawn with a model seed would repeat that model's init numbers: some
    inputs would be (scaled) copies of weight rows. The chapter's batch must not be."""
    x = swiglu.random_batch()
    x = x / x.norm(dim=1, keepdim=True)
    for seed in range(5):
        for variant in ("llama", "gelu_mlp"):
            w = TinyLlama(variant_config(variant), seed=seed).layers[0].mlp.up_proj.weight.detach()
            w = w / w.norm(dim=1, keepdim=True)
            assert (x @ w.T).abs().max() < 0.8


def test_float32_zero_edge():
    import torch.nn.functional as F

    g = swiglu.float32_zero_edge(F.gelu)
    assert -7 < g < -5
    assert F.gelu(torch.tensor(g)) == 0 and F.gelu(torch.tensor(g + 0.01)) != 0
    s = swiglu.float32_zero_edge(F.silu)
    assert s < -80 and F.silu(torch.tensor(s)) == 0
    assert swiglu.float32_zero_edge(torch.tanh) == float("-inf")


def test_full_width_costs_half_again_and_the_rule_about_nothing():
    t = swiglu.full_width_table()
    assert (t["SwiGLU at 4d / two-matrix"] == 1.5).all()
    assert t.loc["ours", "two-matrix at 4d"] == 2 * 64 * 256
    assert t.loc["ours", "SwiGLU at 4d"] == 3 * 64 * 256
    assert t.loc["ours", "SwiGLU at the rule"] == swiglu.mlp_parameters("llama") == 3 * 64 * 192
    assert t.loc["LLaMA-1 7B", "SwiGLU at the rule"] == 3 * 4096 * 11_008
    assert (t.drop(index="ours")["rule / two-matrix"] < 1.02).all()


def test_gate_bins_and_kill_summary_on_hand_values():
    gate = torch.tensor([-9.0, -7.0, -1.0, 0.5, 2.0])
    up = torch.tensor([10.0, -6.0, 1.0, 1.0, 2.0])
    hidden = torch.nn.functional.silu(gate) * up
    b = swiglu.gate_bins(gate, up, hidden, [-10, -5, 0, 5])
    assert b["values"].tolist() == [2, 1, 2]
    assert b.loc[0, "median |up|"] == 6.0  # torch's median of two values is the lower one
    s = swiglu.kill_summary(gate, up, hidden, below=-5)
    assert s["n"] == 2 and s["share"] == 0.4 and s["median_up_off"] == 6.0
    assert s["median_up_all"] == 2.0 and s["median_hidden_off"] < 0.01 * s["median_up_off"]
    assert s["factor"] == pytest.approx(5 / (1 + math.exp(5)))
    assert math.isnan(swiglu.kill_summary(gate, up, hidden, below=-20)["median_up_off"])


def test_the_gate_figure_draws_what_the_bins_hold():
    from llamanat_core.book.plotting import gate_figure, png_bytes

    gate = torch.tensor([-9.0, -7.0, -1.0, 0.5, 2.0])
    up = torch.tensor([10.0, -6.0, 1.0, 1.0, 2.0])
    bins = swiglu.gate_bins(gate, up, torch.nn.functional.silu(gate) * up, [-10, -5, 0, 5])
    fig = gate_figure({"addition": bins, "recall": bins.iloc[1:]}, kill_below=-5.0)
    constructed, addition, recall = fig.axes[:3]
    (dashed, solid), (dashed_r, _) = addition.get_lines()[:2], recall.get_lines()[:2]
    assert dashed.get_xdata().tolist() == [-7.5, -2.5, 2.5]  # bin centres
    assert dashed.get_ydata().tolist() == bins["median |up|"].tolist()
    assert solid.get_ydata().tolist() == bins["median |hidden|"].tolist()
    assert len(dashed_r.get_xdata()) == 2  # each task its own bins
    assert constructed.get_lines()[0].get_xdata()[0] == -5.0  # the threshold line
    assert png_bytes(fig) == png_bytes(gate_figure({"addition": bins, "recall": bins.iloc[1:]}, -5.0))
    assert png_bytes(fig) != png_bytes(gate_figure({"addition": bins, "recall": bins.iloc[1:]}, -3.0))


def test_the_activation_figure_shows_relu_as_the_only_switch():
    from llamanat_core.book.plotting import activation_figure

    fig = activation_figure()
    for bottom in fig.axes[2:]:  # the factors: ReLU's a step of 0 and 1, the other smooth
        step, smooth = bottom.get_lines()
        assert set(step.get_ydata().tolist()) == {0.0, 1.0}
        assert 0 < smooth.get_ydata().min() and smooth.get_ydata().max() < 1


def test_the_parameter_table_counts_the_built_models():
    from llamanat_core import EXPECTED_PARAMETERS

    t = swiglu.parameter_table(("llama", "gelu_mlp"))
    assert list(t.index) == ["llama", "gelu_mlp"] and list(t.MLP) == ["SwiGLU", "GELU"]
    assert list(t.matrices) == [3, 2] and list(t["hidden width"]) == [REFERENCE.d_ff, REFERENCE.gelu_ff]
    assert t["MLP parameters per layer"].nunique() == 1  # the width rule keeps the count
    assert t.loc["llama", "MLP parameters per layer"] == 3 * REFERENCE.d_model * REFERENCE.d_ff
    assert list(t["model parameters"]) == [EXPECTED_PARAMETERS["llama"], EXPECTED_PARAMETERS["gelu_mlp"]]


def test_trained_gates_summarise_each_tasks_committed_reference():
    trained, sources, summary = swiglu.trained_gates(("recall",))
    assert set(trained["recall"]) == {"gate", "up", "hidden"} and "committed" in sources["recall"]
    want = swiglu.gate_summary(trained["recall"]["gate"], trained["recall"]["hidden"])
    assert summary.index.name == "task" and summary.loc["recall"].to_dict() == want
    assert 0 < want["gate_negative"] < 1 and 0 < want["mass_negative_gate"] < want["gate_negative"]
