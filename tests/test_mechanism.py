"""Attention maps are the ones the model used, the task summaries read the committed
weights correctly, and the figures and the block diagram draw what they are given."""
from typing import NamedTuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.analysis.comparisons import variant_rows
from llamanat_core.book import diagram, mechanism, plotting
from llamanat_core.data.tasks import EQ, KEY0, SEP, VALUE0

matplotlib.use("Agg")


class Seeds(NamedTuple):
    solved: int
    unsolved: int | None


@pytest.fixture(scope="module")
def recall_seeds(first_ten_results):
    """Per variant, the smallest solved and unsolved seed of its finite recall runs (the
    ones whose weights the study keeps)."""
    def pick(variant):
        d = variant_rows(first_ten_results, variant, "recall", "finite")
        d = d[d.tie_embeddings == variant_config(variant).tie_embeddings]
        censored = d.groupby("seed").censored.first().astype(bool)
        unsolved = censored.index[censored]
        return Seeds(int(censored.index[~censored].min()), int(unsolved.min()) if len(unsolved) else None)

    return {v: pick(v) for v in ("llama", "abs_pos")}


# ---------------------------------------------------------------- loading


def test_load_trained_gives_the_committed_run_at_its_stop(first_ten_results):
    model, step = mechanism.load_trained("llama", "recall", 1)
    assert not model.training
    assert isinstance(model, TinyLlama) and model.cfg == variant_config("llama")
    r = first_ten_results
    row = r[(r.measurement == "matrix") & (r.regime == "finite") & (r.variant == "llama")
            & (r.task == "recall") & (r.seed == 1)]
    assert step == int(row.stop_step.iloc[0]) != 1200  # seed 1 ran past the floor: a real check


def test_load_trained_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match=r"'mqa'.*\['llama', 'abs_pos'\]"):
        mechanism.load_trained("mqa", "recall", 0)
    with pytest.raises(ValueError, match="unknown task"):
        mechanism.load_trained("llama", "sorting", 0)
    (tmp_path / "llama_recall_seed0.safetensors").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"llama recall seed=3.*\['llama_recall_seed0'\]"):
        mechanism.load_trained("llama", "recall", 3, weights_dir=tmp_path)


# ---------------------------------------------------------------- attention maps


def captured_heads(model, ids):
    """What each layer's attention actually produced: its values (B, Hkv, T, D) and the
    heads' output before o_proj (B, T, H*D), taken from the model's own modules."""
    values, outputs, hooks = [], [], []
    for layer in model.layers:
        attn = layer.self_attn
        hooks.append(attn.v_proj.register_forward_hook(lambda m, a, out: values.append(out)))
        hooks.append(attn.o_proj.register_forward_pre_hook(lambda m, a: outputs.append(a[0])))
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    cfg = model.cfg
    b, t = ids.shape
    values = [v.view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2) for v in values]  # (B, Hkv, T, D)
    return values, outputs


def reproduction_error(model, ids) -> float:
    """Largest gap between weights @ V (from the recomputed maps) and the layer's output."""
    cfg = model.cfg
    weights = mechanism.attention_weights(model, ids)  # (L, B, H, T, T)
    values, outputs = captured_heads(model, ids)
    worst = 0.0
    for w, v, out in zip(weights, values, outputs):
        v = v.repeat_interleave(cfg.n_rep, dim=1)  # (B, H, T, D): head h reads KV head h // n_rep
        mixed = (w @ v).transpose(1, 2).reshape(out.shape)  # (B, T, H*D)
        worst = max(worst, ((mixed - out).abs().max() / out.abs().max()).item())
    return worst


def sharp_model(variant):
    # large weights: peaked, position-dependent maps, so a wrong map cannot match by accident
    return TinyLlama(variant_config(variant, init_std=0.3), seed=3).eval()


MODELS = {"llama": lambda: sharp_model("llama"), "abs_pos": lambda: sharp_model("abs_pos"),
          "mqa": lambda: sharp_model("mqa"), "bias": lambda: sharp_model("bias"),
          "postnorm": lambda: sharp_model("postnorm"),
          "manual": lambda: TinyLlama(variant_config("llama", init_std=0.3, attention="manual"), 3).eval(),
          "llama trained": lambda: mechanism.load_trained("llama", "recall", 0)[0],
          "abs_pos trained": lambda: mechanism.load_trained("abs_pos", "recall", 2)[0]}


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 61, (3, 25), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_attention_weights_are_the_maps_the_model_used(name, ids):
    model = MODELS[name]()
    w = mechanism.attention_weights(model, ids)
    cfg = model.cfg
    assert w.shape == (cfg.n_layers, 3, cfg.n_heads, 25, 25)
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), rtol=0, atol=1e-5)
    assert (w.triu(diagonal=1) == 0).all()  # no query reads a later position
    assert reproduction_error(model, ids) < 1e-5


def test_a_wrong_map_does_not_reproduce_the_output(ids, monkeypatch):
    """The check can fail: the layers' maps swapped do not give their outputs."""
    model = sharp_model("llama")
    real = mechanism.attention_weights
    monkeypatch.setattr(mechanism, "attention_weights", lambda m, i: real(m, i).flip(0))
    assert reproduction_error(model, ids) > 0.1


def test_item_attention_names_the_tokens():
    model = sharp_model("llama")
    maps, tokens = mechanism.item_attention(model, [KEY0, VALUE0 + 2, EQ, KEY0])
    assert maps.shape == (2, 4, 4, 4) and tokens == ["k0", "v2", "=", "k0"]


# ---------------------------------------------------------------- recall


def test_recall_roles_of_a_hand_made_prompt():
    # k3 v7 | k5 v1 | k9 v0 = k5: the second pair is asked about
    prompt = torch.tensor([[KEY0 + 3, VALUE0 + 7, SEP, KEY0 + 5, VALUE0 + 1, SEP,
                            KEY0 + 9, VALUE0, EQ, KEY0 + 5]])
    names = [mechanism.RECALL_ROLES[r] for r in mechanism.recall_roles(prompt)[0]]
    assert names == ["other keys", "other values", "separators", "queried key", "queried value",
                     "separators", "other keys", "other values", "separators", "query"]
    prompt[0, -1] = KEY0 + 4  # a query key that is in no pair
    with pytest.raises(ValueError, match="query key"):
        mechanism.recall_roles(prompt)


def queried_and_best_other_value(model, seed, n_pairs=4):
    """(L, N, H) mass on the queried value and on the most attended other value."""
    prompt = mechanism.validation_ids("recall", seed, n_pairs)[:, :-1]
    w = mechanism.attention_weights(model, prompt)[:, :, :, -1, :].numpy()  # (L, N, H, T)
    roles = mechanism.recall_roles(prompt)[None, :, None, :]  # (1, N, 1, T)
    queried = (w * (roles == mechanism.RECALL_ROLES.index("queried value"))).sum(-1)
    other = np.where(roles == mechanism.RECALL_ROLES.index("other values"), w, -1.0).max(-1)
    return queried, other


def test_a_solved_recall_model_reads_the_queried_value(recall_seeds):
    solved, unsolved = recall_seeds["llama"]
    queried, other = queried_and_best_other_value(mechanism.load_trained("llama", "recall", solved)[0],
                                                  solved)
    # every head of the last layer: more mass on the queried value than on any other value,
    # averaged over the validation items, and on (almost) every item alone
    assert (queried[1].mean(0) > other[1].mean(0)).all()
    assert ((queried[1] > other[1]).mean(0) >= 0.99).all()
    # the unsolved seed never singles it out: another value draws more on most items
    queried, other = queried_and_best_other_value(
        mechanism.load_trained("llama", "recall", unsolved)[0], unsolved)
    assert (queried[1].mean(0) < other[1].mean(0)).all()


def test_recall_summary_partitions_the_mass_and_contrasts_the_seeds(recall_seeds):
    solved, unsolved = recall_seeds["llama"]
    good = mechanism.recall_attention(mechanism.load_trained("llama", "recall", solved)[0], solved)
    total = good.groupby(["layer", "head"]).mass.sum()
    np.testing.assert_allclose(total, 1.0, atol=1e-5)  # the roles cover every position once
    assert set(good.positions[good.role == "other values"]) == {3}
    bad = mechanism.recall_attention(mechanism.load_trained("llama", "recall", unsolved)[0], unsolved)
    value = lambda df: df[(df.layer == 2) & (df.role == "queried value")].set_index("head").mass  # noqa: E731
    assert (value(good) > 0.5).all() and (value(bad) < 0.5).all()  # a majority, or not
    top = good[(good.layer == 2) & (good.role == "queried value")].top
    assert (top == 1.0).all()  # its most attended position is the queried value on every item


def test_at_twelve_pairs_rope_still_finds_the_value_and_the_learned_table_does_not(recall_seeds):
    llama, abs_pos = recall_seeds["llama"].solved, recall_seeds["abs_pos"].solved
    mass = {}
    for variant, seed in (("llama", llama), ("abs_pos", abs_pos)):
        df = mechanism.recall_attention(mechanism.load_trained(variant, "recall", seed)[0], seed, 12)
        mass[variant] = df[(df.layer == 2) & (df.role == "queried value")].mass.mean()
    assert mass["llama"] > 0.5 > 0.1 > mass["abs_pos"]
    by_pair = mechanism.recall_by_pair(mechanism.load_trained("abs_pos", "recall", abs_pos)[0], abs_pos, 12)
    per_pair = by_pair[by_pair.layer == 2].groupby("pair").mass.mean()
    # the learned table finds values only at positions it was trained on (the first pairs)
    assert per_pair.loc[1:3].min() > per_pair.loc[5:].max()
    assert by_pair.groupby(["layer", "head"])["items"].sum().eq(200).all()


def test_lookup_heads_pick_each_seeds_head_that_reads_the_value(recall_seeds):
    solved, unsolved = recall_seeds["llama"]
    heads = mechanism.lookup_heads("llama", [solved, unsolved], (4, 8), n_items=50)
    heads = heads.set_index(["seed", "n_pairs"])
    assert heads.loc[(solved, 4)].mass > 0.5 > heads.loc[(unsolved, 4)].mass
    model = mechanism.load_trained("llama", "recall", solved)[0]
    summary = mechanism.recall_attention(model, solved, n_items=50)
    values = summary[summary.role == "queried value"]
    assert heads.loc[(solved, 4)].mass == pytest.approx(values.mass.max())  # the best head, not the mean
    assert heads.loc[(solved, 4)].mass > values.mass.mean() or values.mass.nunique() == 1


def test_text_attention_reach_of_a_uniform_reader():
    """Queries and keys zeroed: every query spreads its attention evenly over the positions
    it sees, so the mass within two characters back and the mean offset are known by hand."""
    model = TinyLlama(variant_config("llama", vocab_size=81), seed=0).eval()
    for layer in model.layers:
        torch.nn.init.zeros_(layer.self_attn.q_proj.weight)
    ids = torch.randint(0, 81, (3, 12), generator=torch.Generator().manual_seed(0))
    reach = mechanism.text_attention_reach(model, ids, near=2, skip=4)
    t = np.arange(4, 12)  # query positions read; each sees t + 1 positions
    assert reach.near.to_numpy() == pytest.approx(np.mean(3 / (t + 1)), abs=1e-6)
    assert reach.mean_offset.to_numpy() == pytest.approx(np.mean(t / 2), abs=1e-5)
    assert len(reach) == model.cfg.n_layers * model.cfg.n_heads
    with pytest.raises(ValueError, match="skip"):
        mechanism.text_attention_reach(model, ids, skip=11)


# ---------------------------------------------------------------- addition


# ---------------------------------------------------------------- figures


def test_attention_heatmap_labels_tokens_and_blanks_the_future():
    fig, ax = plt.subplots()
    w = np.tril(np.full((3, 3), 0.5))
    im = plotting.attention_heatmap(ax, w, ["k1", "v2", "="])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["k1", "v2", "="]
    assert im.get_array().mask.tolist() == np.triu(np.ones((3, 3), bool), 1).tolist()
    assert len(fig.axes) == 2  # the colour bar
    plotting.attention_heatmap(ax, w[-1:], ["k1", "v2", "="], query_tokens=["="], colorbar=False)
    with pytest.raises(ValueError, match="do not match"):
        plotting.attention_heatmap(ax, w, ["k1", "v2"])
    plt.close(fig)


def test_summary_figures_draw_every_panel(recall_seeds):
    model = mechanism.load_trained("llama", "recall", 0)[0]
    recall = pd.concat([mechanism.recall_attention(model, 0, n, n_items=20) for n in (4, 8)])
    fig = plotting.recall_attention_figure({"llama seed 0": recall, "llama again": recall})
    heat = [ax for ax in fig.axes if ax.get_title()]
    assert len(heat) == 4 and heat[0].get_title() == "llama seed 0: 4 pairs"
    assert fig.axes[-1].get_ylabel() == "attention mass from the answer position"  # the colour bar
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.recall_by_pair_figure(ax, {"llama": mechanism.recall_by_pair(model, 0, 8, n_items=40)}, 2)
    assert ax.get_lines()[0].get_color() == plotting.variant_color("llama")
    plt.close(fig)
    add = mechanism.addition_attention(mechanism.load_trained("abs_pos", "addition", 0)[0], 0, n_items=20)
    fig = plotting.addition_attention_figure({"abs_pos": add}, layers=[1])
    assert len([ax for ax in fig.axes if ax.get_title()]) == 4  # one per head
    plt.close(fig)
    maps, tokens = mechanism.item_attention(model, mechanism.validation_ids("recall", 0)[0, :-1])
    fig = plotting.attention_grid(maps, tokens)
    assert len(fig.axes) == 2 * 4 + 1
    plt.close(fig)
    fig, ax = plt.subplots()
    item = mechanism.recall_item(model, 0, 4)
    plotting.position_heatmap(ax, item)
    bold = [t.get_text() for t in ax.get_xticklabels() if t.get_fontweight() == "bold"]
    assert len(bold) == 2 and bold[1].startswith("v")  # the queried key and its value
    plt.close(fig)


# ---------------------------------------------------------------- block diagram


def texts(fig) -> str:
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_block_diagram_labels_come_from_the_config():
    cfg = variant_config("llama", d_model=32, n_heads=8, n_kv_heads=4, head_dim=8, d_ff=96, n_layers=3)
    fig = diagram.block_diagram(cfg)
    text = texts(fig)
    for label in ("× 3 decoder layers", "q_proj\n32 → 8×8", "k_proj\n32 → 4×8", "gate_proj  32 → 96",
                  "down_proj  96 → 32", "repeat_kv ×2: 4 → 8 heads", "RMSNorm (32)", "RoPE"):
        assert label in text, label
    assert "192" not in text and "64" not in text
    plt.close(fig)
    fig = diagram.block_diagram(variant_config("abs_pos"))
    assert "RoPE" not in texts(fig) and "position table\n48 × 64" in texts(fig)
    plt.close(fig)


def test_block_diagram_rejects_what_it_cannot_draw():
    with pytest.raises(ValueError, match=r"'rmsnorm'.*\['embedding', 'norm'"):
        diagram.block_diagram(highlight="rmsnorm")
    with pytest.raises(ValueError, match="RoPE"):
        diagram.block_diagram(variant_config("abs_pos"), highlight="rope")
    with pytest.raises(ValueError, match="norm_position"):
        diagram.block_diagram(variant_config("postnorm"))


@pytest.mark.parametrize("highlight", diagram.HIGHLIGHTS)
def test_block_diagram_colours_only_the_highlight(highlight):
    fig = diagram.block_diagram(highlight=highlight)
    lit = {highlight} | ({"gqa"} if highlight == "attention" else set()) | (
        {"embedding", "head"} if highlight in ("embedding", "head") else set())  # the head is tied
    red = matplotlib.colors.to_rgba(diagram.HIGHLIGHT)
    patches = [p for ax in fig.axes for p in ax.patches]
    coloured = {p.get_gid() for p in patches if p.get_facecolor() == red}
    assert coloured == lit
    assert all(p.get_facecolor() == red for p in patches if p.get_gid() in lit)
    plt.close(fig)


def test_block_diagram_draws_the_same_bytes_twice():
    first, second, other = (diagram.block_diagram(highlight=h) for h in ("rope", "rope", "norm"))
    assert plotting.png_bytes(first) == plotting.png_bytes(second) != plotting.png_bytes(other)
    for fig in (first, second, other):
        plt.close(fig)




def test_the_inside_figures_draw_one_panel_per_model_and_layer():
    model = TinyLlama(variant_config("llama"), seed=0).eval()
    frame = mechanism.recall_item(model, 0, 4)
    fig = plotting.recall_items_figure({"a": frame, "b": frame})
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2 and [ax.get_title() for ax in panels] == ["a", "b"]
    plt.close(fig)
    text = TinyLlama(variant_config("llama", vocab_size=81), seed=0).eval()
    ids = torch.randint(0, 81, (1, 6), generator=torch.Generator().manual_seed(0))
    maps = mechanism.attention_weights(text, ids)[:, 0].numpy()  # (L, H, T, T)
    fig = plotting.text_window_figure({"llama": maps, "abs_pos": maps}, "ab\ncd ")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2 * text.cfg.n_layers
    assert [t.get_text() for t in panels[-1].get_xticklabels()] == ["a", "b", "\\n", "c", "d", " "]
    assert panels[0].images[0].get_array()[3, 1] == pytest.approx(maps[0, :, 3, 1].mean())  # the heads' mean
    plt.close(fig)
