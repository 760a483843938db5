"""The sweep chapter's arithmetic: pair angles, slowest period, wrap counts,
and the same parameter count at every base."""
import math

import pytest
import torch

from llamanat_core.book.helpers.sweep import base_label, pair_angles, parameters_per_base, period_table
from llamanat_core.study import THETAS


def test_pair_angles_by_hand():
    a = pair_angles(10_000.0, head_dim=16, positions=38)
    assert a.shape == (38, 8)
    assert torch.equal(a[0], torch.zeros(8))  # position 0 is never rotated
    assert a[37, 0].item() == pytest.approx(37.0)  # pair 0 turns one radian per position
    assert a[37, 1].item() == pytest.approx(37 / 10_000 ** (2 / 16))
    assert a[37, 7].item() == pytest.approx(37 / 10_000 ** (14 / 16))
    assert torch.allclose(a[20], 20 * a[1])  # linear in the position


def test_period_table_columns_by_hand():
    t = period_table(THETAS)
    assert list(t.index) == [10.0, 100.0, 10_000.0, 1_000_000.0]
    assert t.loc[10_000.0, "slowest period (positions)"] == pytest.approx(2 * math.pi * 10 ** 3.5)
    assert t.loc[10.0, "slowest period (positions)"] == pytest.approx(2 * math.pi * 10 ** (14 / 16))
    wraps = t["pairs past a full turn over 37 positions"]
    # 37 * theta^(-2i/16) >= 2*pi: base 10 -> pairs 0..6, base 100 -> 0..3, 1e4 and 1e6 -> 0..1
    assert wraps.tolist() == [7, 4, 2, 2]
    slow = t["slowest pair over 37 positions (degrees)"]
    assert slow.is_monotonic_decreasing  # a larger base turns the slowest pair less
    assert slow.loc[10.0] == pytest.approx(math.degrees(37 / 10 ** (14 / 16)))


def test_same_parameters_at_every_base():
    params = parameters_per_base(THETAS)
    assert len(set(params.values())) == 1  # the base is a constant: no parameter depends on it
    assert period_table(THETAS)["parameters"].nunique() == 1


def test_base_label():
    assert [base_label(t) for t in THETAS] == ["10", "100", "10,000", "1,000,000"]


def test_value_offsets_follow_the_item_layout():
    from llamanat_core.book.helpers.sweep import value_offsets

    # k v | k v | ... = q: values at 1, 4, 7, ...; the probe key (the reader) at 3n
    assert value_offsets(4) == [2, 5, 8, 11]
    assert value_offsets(12) == list(range(2, 36, 3))


def test_steady_pairs_by_hand():
    """A pair is steady when it turns less than a quarter turn across the item's values:
    speed * (farthest - nearest offset) < pi/2."""
    from llamanat_core.book.helpers.sweep import steady_pairs, steady_table

    # head_dim 2: pair 0 alone, one radian per position; 9 positions between the values
    assert steady_pairs(10_000.0, 4, head_dim=2) == 0
    # base 10 at 4 pairs: pair 7 turns 10^(-7/8) * 9 = 1.20 rad (steady), pair 6 1.60 (not)
    assert 10 ** (-7 / 8) * 9 < math.pi / 2 < 10 ** (-6 / 8) * 9
    t = steady_table(THETAS)
    assert t.to_numpy().tolist() == [[1, 0, 0], [4, 3, 2], [6, 5, 5], [6, 6, 6]]
    assert (t.diff(axis=1).fillna(0) <= 0).all().all()  # longer items never gain a steady pair
    assert (t.diff().fillna(0) >= 0).all().all()  # a larger base never loses one


def test_window_rise_is_each_arms_mean_loss_past_the_trained_window():
    import pandas as pd

    from llamanat_core.book.helpers.sweep import window_rise

    runs = pd.DataFrame({"variant": "llama", "rope_theta": [10_000.0, 10_000.0, 100.0],
                         "loss_end": [1.0, 2.0, 1.5], "loss_2x": [1.5, 2.5, 1.5],
                         "loss_4x": [3.0, 4.0, 1.75]})
    rise = window_rise(runs)
    assert rise.to_dict("index") == {"base 100": {"loss_2x": 0.0, "loss_4x": 0.25},
                                     "llama": {"loss_2x": 0.5, "loss_4x": 2.0}}


def test_angle_wheel_figure_draws_each_base_modulo_360():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import angle_wheel_figure

    fast = torch.tensor([[0.0, 0.0], [math.pi, 0.5 * math.pi], [3 * math.pi, math.pi]])  # (position, pair)
    fig = angle_wheel_figure({"base 10": fast, "base 1M": torch.zeros(3, 2)}, read_at=(1,))
    axes = fig.axes[:2]
    assert [ax.get_title() for ax in axes] == ["base 10", "base 1M"]
    assert axes[0].get_ylabel() == "channel pair i" and axes[0].get_xlabel() == "position"
    image = axes[0].images[0].get_array()
    assert image.shape == (2, 3)  # pairs on the rows, positions on the columns
    assert image[0].tolist() == pytest.approx([0.0, 180.0, 180.0])  # 540° wraps to 180°
    assert image[1].tolist() == pytest.approx([0.0, 90.0, 180.0])
    assert axes[1].images[0].get_array().max() == 0.0
    assert [line.get_xdata()[0] for line in axes[0].lines] == [1]  # the read position, dashed
    assert fig.axes[2].get_ylabel() == "angle mod 360 (degrees)"  # the colour bar
    plt.close(fig)
