"""The KV-cache chapter's probes: arithmetic table, the measured cache (tokens,
bytes), the reference-weights loader and the timing file."""
import json

import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.book.helpers import kv_cache as kp
from llamanat_core.data.tasks import Recall
from llamanat_core.model.kv import KVCache
from llamanat_core.model.published import kv_cache_bytes
from llamanat_core.study.kv_timing import write_timing


@pytest.fixture(scope="module")
def prompts():
    return Recall(seed=1, n_pairs=8).splits(0, 0, 12).test.prompt  # (12, 25)


def test_arithmetic_table_by_hand():
    t = kp.arithmetic_table()
    assert t.loc["tiny GQA (reference)", "bytes"] == 2 * 2 * 2 * 2048 * 16 * 2 == 524_288
    assert t.loc["tiny MHA", "bytes"] == 2 * t.loc["tiny GQA (reference)", "bytes"]
    assert t.loc["tiny MQA", "bytes"] == t.loc["tiny GQA (reference)", "bytes"] // 2
    assert t.loc["LLaMA-1 7B", "bytes"] == 2 ** 30
    assert t.loc["Llama-2-70B", "bytes"] == 2 * 80 * 8 * 4096 * 128 * 2
    assert (t["bytes per position"] * t["positions"] == t["bytes"]).all()
    assert kp.arithmetic_table(positions=4096).loc["tiny MQA", "bytes"] == 2 * 262_144


def test_human_bytes():
    assert kp.human_bytes(524_288) == "512 KiB"
    assert kp.human_bytes(2 ** 30) == "1 GiB"
    assert kp.human_bytes(1_342_177_280) == "1.25 GiB"
    assert kp.human_bytes(100) == "100 B"
    assert kp.human_bytes(1_677_721_600) == "1.56 GiB"  # LLaMA-1 13B: 1.5625 GiB, rounded


@pytest.mark.parametrize("variant", ["mha", "llama", "mqa"])
def test_generate_with_cache_holds_the_computed_bytes(variant, prompts):
    """(that cached decoding gives the recomputed tokens is test_kv's)"""
    model = TinyLlama(variant_config(variant, init_std=0.3), seed=2).eval()
    tokens, cache = kp.generate_with_cache(model, prompts[:1], 9, torch.float16, capacity=2048)
    assert tokens.shape == (1, 9)
    assert cache.length == 25 + 9 - 1  # the last token is produced, never fed
    cfg = model.cfg
    assert cache.nbytes(filled_only=False) == kv_cache_bytes(2, cfg.n_kv_heads, 16, 2048)
    assert kp.held_bytes(cache) == cache.nbytes() == kv_cache_bytes(2, cfg.n_kv_heads, 16, cache.length)
    assert kp.unwritten_is_zero(cache)
    cache.k[0][0, 0, cache.length, 0] = 1.0  # a write past the prefix is noticed
    assert not kp.unwritten_is_zero(cache)


def test_cached_vs_recomputed_reports_identical_and_catches_a_broken_cache(prompts, monkeypatch):
    model = TinyLlama(variant_config("llama", init_std=0.3), seed=1).eval()
    ok = kp.cached_vs_recomputed(model, prompts, 8)
    assert ok["identical"] and ok["tokens that differ"] == 0 and ok["tokens compared"] == 12 * 8
    assert ok["distinct generations"] > 1
    update = KVCache.update

    def stale(self, layer, k, v, start):  # a cache that hands back V shifted by one position
        kk, vv = update(self, layer, k, v, start)
        return kk, vv.roll(1, dims=2)

    monkeypatch.setattr(KVCache, "update", stale)
    bad = kp.cached_vs_recomputed(model, prompts, 8)
    assert not bad["identical"] and bad["tokens that differ"] > 0


def test_load_reference_round_trip(tmp_path):
    from llamanat_core.study.weights import kept_run, weights_bytes

    assert kp.load_reference("recall", tmp_path) is None
    model = TinyLlama(variant_config("llama"), seed=5)
    run = kept_run("recall", "llama", 0)
    (tmp_path / "llama_recall_seed0.safetensors").write_bytes(weights_bytes(run, model, 1))  # as the study
    loaded = kp.load_reference("recall", tmp_path)
    ids = torch.randint(0, 61, (2, 13), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded(ids), model(ids))
    assert loaded.lm_head.weight is loaded.embed_tokens.weight  # still tied


def test_measure_timing_shape_and_threads():
    torch.set_num_threads(3)  # not the tests' one thread, so a forgotten restore shows
    try:
        t = kp.measure_timing(lengths=(4, 8), repeats=2)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(1)
    assert t["lengths"] == [4, 8] and len(t["cached_ms"]) == len(t["recompute_ms"]) == 2
    assert all(x > 0 for x in t["cached_ms"] + t["recompute_ms"])
    assert t["machine"]["threads"] == 1 and t["machine"]["torch"] == torch.__version__
    assert "cpu" in t["machine"]
    json.dumps(t)  # JSON-able as it stands
    with pytest.raises(ValueError):
        kp.measure_timing(lengths=(1,), repeats=1)
    with pytest.raises(ValueError, match="learned table"):
        kp.measure_timing(lengths=(64,), repeats=1, variant="abs_pos")


def test_timing_file_round_trip_is_atomic(tmp_path):
    path = tmp_path / "study" / "kv_timing.json"
    with pytest.raises(FileNotFoundError, match="llamanat study"):
        kp.load_timing(path)
    timing = {"lengths": [16, 32], "cached_ms": [0.5, 0.6], "recompute_ms": [0.7, 1.2],
              "machine": {"cpu": "x", "torch": "y", "threads": 1}}
    assert write_timing(timing, path) == path
    assert kp.load_timing(path) == timing
    assert [p.name for p in path.parent.iterdir()] == ["kv_timing.json"]  # no temp file left
    path.write_text(json.dumps({"lengths": [16], "cached_ms": [1.0, 2.0], "recompute_ms": [1.0],
                                "machine": {}}))
    with pytest.raises(ValueError, match="malformed"):
        kp.load_timing(path)


def test_measure_text_timing_times_both_ways_and_checks_the_text_is_the_same(tmp_path):
    from llamanat_core.data.text import VOCAB_SIZE
    from llamanat_core.study.kv_timing import load_text_timing

    model = TinyLlama(variant_config("llama", vocab_size=VOCAB_SIZE, max_seq_len=12), seed=0)
    torch.set_num_threads(3)  # not the tests' one thread, so a forgotten restore shows
    try:
        t = kp.measure_text_timing(n_new=30, repeats=2, prompt="Emma", model=model)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(1)
    assert t["identical"] and t["n_new"] == 30 and t["window"] == 12 and t["machine"]["threads"] == 1
    assert t["cached_chars_per_s"] == pytest.approx(30 / t["cached_s"], rel=1e-2)
    assert t["recompute_chars_per_s"] == pytest.approx(30 / t["recompute_s"], rel=1e-2)
    path = write_timing(t, tmp_path / "kv_text_timing.json")
    assert load_text_timing(path) == json.loads(json.dumps(t))
    path.write_text(json.dumps({k: v for k, v in t.items() if k != "identical"}))
    with pytest.raises(ValueError, match="malformed"):
        load_text_timing(path)
    with pytest.raises(ValueError, match="n_new"):
        kp.measure_text_timing(n_new=0, model=model)


def test_cache_agreement_rows_and_missing_references(prompts, tmp_path, monkeypatch):
    addition = torch.zeros(3, 7, dtype=torch.long)
    stds = {"narrow": 0.02, "wide": 0.3}
    t = kp.cache_agreement(prompts, 8, stds, addition, variants=["llama", "mqa"], weights_dir=tmp_path)
    assert list(t.index) == [("llama", "narrow"), ("mqa", "narrow"), ("llama", "wide"), ("mqa", "wide")]
    assert t.index.names == ["variant", "weights"] and "tokens" not in t.columns
    assert t["identical"].all() and (t["tokens compared"] == 12 * 8).all() and t["identical"].dtype == bool
    assert t.loc[("llama", "wide"), "distinct generations"] > 1  # no reference in tmp_path: no trained rows
    model = TinyLlama(variant_config("llama"), seed=3)
    monkeypatch.setattr(kp, "load_reference", lambda task, d: model if task == "addition" else None)
    t = kp.cache_agreement(prompts, 8, {"wide": 0.3}, addition, variants=["llama"], weights_dir=tmp_path)
    assert list(t.index) == [("llama", "wide"), ("llama", "trained on addition, seed 0")]
    assert t.loc[("llama", "trained on addition, seed 0"), "tokens compared"] == 3 * 6  # 6 tokens each


@pytest.mark.parametrize("variant, heading", [("llama", "GQA (2 KV heads)"), ("mqa", "GQA (1 KV head)")])
def test_cache_bytes_counts_three_ways_and_the_table_shows_them(variant, heading, prompts):
    model = TinyLlama(variant_config(variant, init_std=0.3), seed=2).eval()
    m = kp.cache_bytes(model, prompts[:1], 9, 64)
    heads = model.cfg.n_kv_heads
    assert m["filled"] == 25 + 9 - 1 and m["tensors"] == 4 and m["shape"] == (1, heads, 64, 16)
    assert m["allocated"] == m["formula, full"] == kv_cache_bytes(2, heads, 16, 64)
    assert m["held"] == m["counted"] == m["formula, filled"] == kv_cache_bytes(2, heads, 16, 33)
    assert m["unwritten zero"] and m["same as generate"] and m["dtype"] == "float16" and 0 <= m["kept"] <= 9
    table = kp.cache_bytes_table({"GQA": m, "other": {**m, "KV heads": 1}}, 64)
    assert list(table.columns) == [heading, "other (1 KV head)"]
    assert table.loc["formula at 64 positions", "other (1 KV head)"] == f"{m['formula, full']:,}"
    assert table.loc["tokens equal to fp32 recomputation"].iloc[0] == f"{m['kept']} of 9"


def test_cache_size_figure_draws_bytes_per_layout():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import cache_size_figure

    names = {"mha": "MHA", "llama": "GQA", "mqa": "MQA"}
    shapes = [("one", 1, 4, {"mha": 4, "llama": 2, "mqa": 1}, 256),
              ("two", 2, 8, {"mha": 8, "llama": 2, "mqa": 1}, 512)]
    fig = cache_size_figure(shapes, names, contexts=[128, 256, 512])
    axes = fig.axes
    assert len(axes) == 4
    assert [ax.get_title() for ax in axes] == ["GQA against MHA", "MQA against MHA"] * 2
    gqa, mha = axes[0].lines[1], axes[0].lines[0]
    assert gqa.get_label() == "GQA: 2 KV heads" and mha.get_label() == "MHA: 4 KV heads"
    # K and V, 1 layer, 2 heads of 4, 2 bytes a value: 32 bytes per position
    assert list(gqa.get_ydata()) == [32 * 128, 32 * 256, 32 * 512]
    assert list(axes[1].lines[1].get_ydata()) == [16 * 128, 16 * 256, 16 * 512]
    assert axes[1].lines[1].get_label() == "MQA: 1 KV head"
    assert axes[2].lines[2].get_xdata()[0] == 512  # the dotted mark at the second shape's context
    assert axes[0].get_ylabel() == "KV cache, fp16, batch 1"
    plt.close(fig)


def test_timing_figure_draws_both_curves_and_guides():
    import matplotlib.pyplot as plt

    from llamanat_core.book.plotting import timing_figure

    fig = timing_figure([16, 32, 64], [1.0, 2.0, 8.0], [0.5, 0.5, 0.6])
    ax = fig.axes[0]
    full, cached, slope1, slope2 = ax.lines
    assert full.get_label() == "recomputing every position" and list(full.get_ydata()) == [1.0, 2.0, 8.0]
    assert cached.get_label() == "with the KV cache" and list(cached.get_ydata()) == [0.5, 0.5, 0.6]
    assert list(slope1.get_ydata()) == pytest.approx([2.0, 4.0, 8.0])  # through the last point
    assert list(slope2.get_ydata()) == pytest.approx([0.5, 2.0, 8.0])
    assert ax.get_ylim() == pytest.approx((0.25, 16.0))
    assert ax.get_ylabel() == "ms per generated token"
    plt.close(fig)
