"""The GQA chapter's probes (repeat_kv read and checked) and the cross-task ordering sentence."""
import pytest

from llamanat_core.book.helpers import gqa


def interleaved_repeat(x, n_rep):
    """A plausible but wrong expansion: heads 0,1,0,1 instead of 0,0,1,1."""
    return x.repeat(1, n_rep, 1, 1)


def test_head_map_reads_repeat_kv():
    assert gqa.head_map(4, 4) == [0, 1, 2, 3]
    assert gqa.head_map(4, 2) == [0, 0, 1, 1]
    assert gqa.head_map(4, 1) == [0, 0, 0, 0]
    assert gqa.head_map(4, 2, fn=interleaved_repeat) == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="divisible"):
        gqa.head_map(4, 3)


def test_check_repeat_kv_passes_the_package_and_catches_a_wrong_layout():
    for n_kv in (4, 2, 1):
        assert gqa.check_repeat_kv(4, n_kv)
    assert not gqa.check_repeat_kv(4, 2, fn=interleaved_repeat)
    assert not gqa.check_repeat_kv(4, 2, fn=lambda x, n: x)  # too few heads


def test_projection_table_counts():
    t = gqa.projection_table()
    assert list(t["KV heads"]) == [4, 2, 1]
    assert list(t["k_proj"]) == ["64×64", "32×64", "16×64"]
    assert list(t["K+V parameters per layer"]) == [8192, 4096, 2048]
    # the models differ by their K and V projections in both layers, and by nothing else
    size = dict(zip(t.variant, t["model parameters"]))
    kv = dict(zip(t.variant, t["K+V parameters per layer"]))
    assert size["mha"] - size["llama"] == 2 * (kv["mha"] - kv["llama"]) == 8192
    assert size["llama"] - size["mqa"] == 2 * (kv["llama"] - kv["mqa"]) == 4096
    # 2 (K, V) x 2 layers x KV heads x 16 channels x 2 bytes
    assert list(t["KV-cache bytes per token (fp16)"]) == [512, 256, 128]
    assert gqa.head_map_table().loc["GQA"].tolist() == [0, 0, 1, 1]


def test_head_map_figure_draws_one_line_per_read_from_each_query_head_to_its_kv_head():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import head_map_figure, variant_color

    maps = gqa.head_maps()
    assert maps == {"mha": ("MHA", [0, 1, 2, 3]), "llama": ("GQA", [0, 0, 1, 1]),
                    "mqa": ("MQA", [0, 0, 0, 0])}
    fig = head_map_figure(maps)
    try:
        gqa_panel = fig.axes[1]
        assert gqa_panel.get_title() == "GQA: 2 KV heads (llama)"
        assert fig.axes[2].get_title() == "MQA: 1 KV head (mqa)"
        ends = [(line.get_xdata()[0], line.get_xdata()[1]) for line in gqa_panel.get_lines()]
        assert ends == [(0, 0.5), (1, 0.5), (2, 2.5), (3, 2.5)]  # each KV head centred under its readers
        assert {line.get_color() for line in gqa_panel.get_lines()} == {variant_color("llama")}
        wrong = head_map_figure({"llama": ("GQA", gqa.head_map(4, 2, fn=interleaved_repeat))})
        wrong_ends = [(line.get_xdata()[0], line.get_xdata()[1]) for line in wrong.axes[0].get_lines()]
        assert wrong_ends != ends  # an interleaved expansion draws crossed reads
        plt.close(wrong)
    finally:
        plt.close(fig)


def test_expansion_checks_tabulate_each_expansion_in_each_layout():
    from llamanat_core.model.blocks import repeat_kv

    checks = gqa.expansion_checks({"right": repeat_kv, "tiled": lambda x, n: x.repeat(1, n, 1, 1)})
    assert list(checks.index) == ["MHA", "GQA", "MQA"] and list(checks.n_rep) == [1, 2, 4]
    assert checks.right.all()
    assert checks.tiled.to_dict() == {"MHA": True, "GQA": False, "MQA": True}  # wrong only where groups exist
