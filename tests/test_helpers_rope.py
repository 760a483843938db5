"""The RoPE chapter's probes: frequencies, the diagonal check, the counterfactual layer, the
permutation table, and the position-table rows training never reaches. The properties the
probes show (offset invariance, norms, V unrotated, pairing equivalence) are tested, on the
package and on these probes, in tests/test_rope.py."""
import math

import pytest
import torch

from llamanat_core import Config, TinyLlama
from llamanat_core.book.helpers import rope as probe


def test_frequency_table():
    t = probe.frequency_table(16, 10_000.0)
    assert len(t) == 8
    assert t["radians per position"].iloc[0] == 1.0
    assert t["positions per turn"].iloc[0] == pytest.approx(2 * math.pi)
    ratios = t["radians per position"].iloc[1:].values / t["radians per position"].iloc[:-1].values
    assert ratios == pytest.approx([10_000.0 ** (-2 / 16)] * 7, rel=1e-5)
    assert t.loc[3, "half-split channels"] == "(3, 11)" and t.loc[3, "interleaved channels"] == "(6, 7)"


def test_diagonal_deviation_detects_a_broken_table():
    s = probe.offset_scores(n=8)
    s[5, 2] += 0.3
    assert probe.diagonal_deviation(s) == pytest.approx(0.3, abs=1e-4)


def test_counterfactual_equals_the_layer_without_rotation():
    model = TinyLlama(Config(init_std=0.1), seed=0).eval()
    attn = model.layers[0].self_attn
    x = torch.randn(1, 7, 64, generator=torch.Generator().manual_seed(0))
    identity = (torch.ones(7, 16), torch.zeros(7, 16))  # every angle zero
    with torch.no_grad():
        torch.testing.assert_close(probe._attention_rotating_v(attn, x, identity), attn(x, identity))


def test_permutation_table():
    t = probe.permutation_table(16)
    assert t["interleaved channel"].tolist() == list(range(0, 16, 2)) + list(range(1, 16, 2))
    assert t.loc[9, "rotates in pair"] == 1


def test_rows_past_the_trained_length_get_no_gradient_and_only_decay():
    r = probe.untouched_rows(seed=0, n_pairs=4, batch=16)
    assert (r["seen"], r["rows"]) == (13, 48)
    assert r["max_grad_unseen"] == 0.0
    assert r["min_grad_row_norm_seen"] > 0
    assert all(g == 0 for g in r["grad_row_norm"][13:]) and all(g > 0 for g in r["grad_row_norm"][:13])
    assert r["step_factor"] == pytest.approx(1 - 1e-3 * 0.01)
    assert r["max_step_deviation"] < 1e-9
    assert r["init_row_norm_unseen"] == pytest.approx(0.16, rel=0.15)


# ---------------------------------------------------------------- what the trained models read



def test_the_row_gradient_figure_draws_a_bar_per_row_and_a_line_per_mark():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import row_gradient_figure

    norms = [1.0, 0.5, 0.0, 0.0]
    fig = row_gradient_figure(norms, {"trained length": 2, "longer": 3}, title="t")
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == norms
    assert [ln.get_xdata()[0] for ln in ax.get_lines()] == [1.5, 2.5]  # before the first row past each mark
    assert [t.get_text() for t in ax.texts] == ["trained length", "longer"] and ax.get_title() == "t"
    plt.close(fig)


def test_the_score_map_is_centred_on_zero_and_ticks_every_third_position():
    import matplotlib.pyplot as plt
    import numpy as np

    from llamanat_core.book.plotting import score_map_figure

    scores = np.array([[1.0, -2.0], [0.5, 0.0]])
    fig = score_map_figure(scores, title="t", tick_every=1)
    im = fig.axes[0].get_images()[0]
    assert im.get_clim() == (-2.0, 2.0)  # symmetric: white is zero
    np.testing.assert_array_equal(im.get_array(), scores)
    assert list(fig.axes[0].get_xticks()) == [0, 1] and fig.axes[0].get_title() == "t"
    plt.close(fig)
