"""The norm chapter's probes: the centred-vector identity, the eps failure, parameter
counts, and the deep random-weights stack under pre-, post- and no normalisation."""
import math

import numpy as np
import pytest
import torch

from llamanat_core import Config, TinyLlama, variant_config
from llamanat_core.analysis import report
from llamanat_core.book.helpers import norm as probe
from llamanat_core.data.tasks import VOCAB_SIZE
from llamanat_core.model.blocks import RMSNorm


def test_rms_and_layer_norm_agree_only_on_centred_vectors():
    out = probe.centred_identity(dim=64, seed=3)
    assert abs(out["mean_after"]) < 1e-6
    assert out["centred"] < 1e-5
    assert out["uncentred"] > 0.1  # the control: a shifted vector separates them


def test_rms_norm_computes_in_at_least_float32():
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norm = RMSNorm(64)
    exact = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert norm(x).dtype == torch.float64
    assert (norm(x) - exact).abs().max() < 1e-14  # no float32 step in between
    half = x.to(torch.bfloat16)
    up = half.float()
    expected = (up * torch.rsqrt(up.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16)
    assert torch.equal(norm(half), norm.weight * expected)  # normalised in float32, then rounded


def test_eps_zero_gives_nan_on_a_zero_vector_and_eps_fixes_it():
    t = probe.eps_table(dim=8).set_index(["norm", "eps"])
    for norm in ("RMSNorm", "LayerNorm"):
        assert t.loc[(norm, "0"), "undefined entries (0/0)"] == 8
        assert t.loc[(norm, "1e-05"), "undefined entries (0/0)"] == 0
        assert t.loc[(norm, "1e-05"), "max |output|"] == "0.0"
        assert t.loc[(norm, "0"), "first entries"] == "undefined"  # no NaN printed


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
    assert report.overflow_text([layer]).startswith("overflows float32")


def test_overflow_depth_is_where_the_float32_stream_stops_being_finite():
    """The depth study measures in float64, but the overflow it reports is float32's."""
    depth, _ = probe.depth_profile("none", seed=0, init_std=0.25, n_layers=16, batch=2)
    first_nan = int(depth.layer[depth.rms.isna()].min())
    model = TinyLlama(Config(n_layers=16, norm_position="none", init_std=0.25), seed=0).eval()
    ids = torch.randint(0, VOCAB_SIZE, (2, 13), generator=torch.Generator().manual_seed(1234))
    with torch.no_grad():
        streams, _ = probe._streams(model, ids)
    finite = [bool(torch.isfinite(x).all()) for x in streams]
    assert finite.index(False) == first_nan
    with torch.no_grad():  # in float64 the same stream is still finite there
        streams64, _ = probe._streams(model.double(), ids)
    assert torch.isfinite(streams64[first_nan]).all()


def test_depth_profile_does_not_depend_on_rounding_at_the_digits_shown(monkeypatch):
    """Another CPU's kernels round float64 differently by about one unit in the last place;
    jittering the float64 weights by 1e-15 stands in for that. Post-norm at the large init
    is the most sensitive stack (it amplifies a change by about 10^5 before saturating)."""
    clean, logits = probe.depth_profile("post", seed=0, init_std=0.25, n_layers=32)

    class Jittered(TinyLlama):
        def double(self):
            out = super().double()
            g = torch.Generator().manual_seed(7)
            with torch.no_grad():
                for p in self.parameters():
                    p.mul_(1 + 1e-15 * torch.randn(p.shape, generator=g, dtype=p.dtype))
            return out

    monkeypatch.setattr(probe, "TinyLlama", Jittered)
    jittered, jittered_logits = probe.depth_profile("post", seed=0, init_std=0.25, n_layers=32)
    assert logits > 1000  # saturated: the output no longer remembers which input it saw
    assert jittered_logits != logits  # the jitter did reach the result ...
    assert jittered_logits == pytest.approx(logits, rel=1e-8)  # ... far below the 7 digits shown
    for column in ("rms", "sensitivity"):
        assert np.allclose(jittered[column], clean[column], rtol=1e-8, atol=0)


def test_depth_profile_is_deterministic():
    torch.manual_seed(123)  # the global RNG must not matter
    a, la = probe.depth_profile("pre", seed=1, n_layers=3, batch=2)
    torch.manual_seed(456)
    b, lb = probe.depth_profile("pre", seed=1, n_layers=3, batch=2)
    assert a.equals(b) and la == lb


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




def test_the_depth_figure_sets_each_placement_against_pre_norm_per_init():
    import matplotlib.pyplot as plt
    import pandas as pd

    from llamanat_core.book.plotting import depth_figure

    rows = [{"init_std": std, "norm_position": pos, "seed": seed, "layer": layer,
             "rms": (1 + layer) * std * (2 if pos == "none" else 1) + 0.01 * seed}
            for std in (0.02, 0.25) for pos in ("pre", "post", "none")
            for seed in (0, 1) for layer in range(4)]
    colors = {"pre": "#0072B2", "post": "#CC79A7", "none": "#7f7f7f"}
    fig = depth_figure(pd.DataFrame(rows), (0.02, 0.25), colors)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == [f"init std {s}: {p} against pre"
                                                for s in ("0.02", "0.25") for p in ("post", "none")]
    assert all(ax.get_yscale() == "log" for ax in axes)
    # per panel: two seeds and a mean for each of its two placements; the none panel's mean is twice pre's
    none_top = axes[3].get_lines()
    assert len(none_top) == 6
    labelled = {ln.get_label(): ln.get_ydata() for ln in none_top if not ln.get_label().startswith("_")}
    np.testing.assert_allclose(labelled["none"], 2 * labelled["pre"] - 0.005)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["pre", "post", "none"]
    plt.close(fig)
    with pytest.raises(ValueError, match="none"):
        depth_figure(pd.DataFrame(rows), (0.02, 0.25), {"pre": "#000000", "post": "#111111"})
