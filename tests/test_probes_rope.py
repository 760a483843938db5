"""The RoPE chapter's probes: frequencies, the diagonal check, the counterfactual layer, the
permutation table, and the position-table rows training never reaches. The properties the
probes show (offset invariance, norms, V unrotated, pairing equivalence) are tested, on the
package and on these probes, in tests/test_rope.py."""
import math

import pytest
import torch

from llamanat_core import Config, TinyLlama, variant_config
from llamanat_core.probes import rope as probe


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


def test_trained_table_rows_past_the_trained_length_only_decay(tmp_path):
    """A short abs_pos fit saved as the study saves it (the stop step in the metadata):
    rows the model never reads are init × (1 − lr·wd)^steps exactly; the rows it reads
    move. (And the check can fail: an unrelated table is far off, an updated row too.)"""
    import json

    from safetensors.torch import save_file

    from llamanat_core.study import Run, execute, weights_step
    from llamanat_core.train import Budget

    budget = Budget(steps=15, min_steps=15, eval_every=5, n_train=128, n_val=16, n_test=16,
                    checkpoints=(15,))
    _, weights = execute(Run("recall", "abs_pos", 0, budget=budget, compile=False))
    path = tmp_path / "t.safetensors"
    path.write_bytes(weights)
    out = probe.trained_table(path, seen=13, seed=0)
    assert out["steps"] == 15 and weights_step(path) == 15
    assert out["unseen_max_rel_dev"] < 1e-6
    assert out["seen_min_rel_change"] > 1e-3
    other = TinyLlama(variant_config("abs_pos"), seed=1).embed_positions.weight.detach().clone()
    save_file({"embed_positions.weight": other}, str(path), metadata={"run": json.dumps({"step": 15})})
    assert probe.trained_table(path, seen=13, seed=0)["unseen_max_rel_dev"] > 0.5

    # Another CPU's initial draw, off by one ulp in every entry of those rows, stays within
    # INIT_LAST_BITS; one AdamW-sized update (lr) of one entry is far outside it.
    from safetensors.torch import load_file

    path.write_bytes(weights)
    table = load_file(str(path))["embed_positions.weight"]
    save = lambda t: save_file({"embed_positions.weight": t}, str(path),  # noqa: E731
                               metadata={"run": json.dumps({"step": 15})})
    table[13:] = torch.nextafter(table[13:], torch.tensor(float("inf")))
    save(table)
    off_by_an_ulp = probe.trained_table(path, seen=13, seed=0)["unseen_max_rel_dev"]
    assert 0 < off_by_an_ulp <= probe.INIT_LAST_BITS
    table[20, 0] += Budget().lr
    save(table)
    assert probe.trained_table(path, seen=13, seed=0)["unseen_max_rel_dev"] > 1000 * probe.INIT_LAST_BITS


# ---------------------------------------------------------------- what the trained models read

def _addition_summary(split: bool):
    """A constructed `addition_attention` frame: 2 layers x 2 heads. With `split`, head
    (1, 1) reads both digits of each chain token's column half and half; otherwise head
    (2, 1) reads a's digit and head (2, 2) b's digit, each alone."""
    import pandas as pd

    from llamanat_core.mechanism import ADDITION_SOURCES, CHAIN

    rows = []
    for layer in (1, 2):
        for head in (1, 2):
            for target in CHAIN:
                col = probe.COLUMN_OF[target]
                for source in ADDITION_SOURCES:
                    if split:
                        mass = 0.45 if (layer, head) == (1, 1) and source in (f"a {col}", f"b {col}") else 0.0
                    else:
                        mass = 0.9 if ((layer, head) == (2, 1) and source == f"a {col}"
                                       or (layer, head) == (2, 2) and source == f"b {col}") else 0.0
                    rows.append({"layer": layer, "head": head, "target": target, "source": source,
                                 "mass": mass})
    return pd.DataFrame(rows)


def test_column_reads_tells_one_head_on_both_digits_from_one_head_per_digit():
    split = probe.column_reads(_addition_summary(split=True))
    assert list(split.index) == ["sum 1", "carry 1", "sum 2", "carry 2", "sum 3", "carry 3"]
    assert split.both.tolist() == pytest.approx([0.45] * 6)
    assert split.column.tolist() == pytest.approx([0.9] * 6)
    assert (split.layer == 1).all() and (split["head"] == 1).all()
    separate = probe.column_reads(_addition_summary(split=False))
    assert separate.column.tolist() == pytest.approx([0.9] * 6)  # the column is read as well...
    assert separate.a.tolist() == pytest.approx([0.9] * 6) and separate.b.tolist() == pytest.approx([0.9] * 6)
    assert separate.both.tolist() == pytest.approx([0.0] * 6)  # ...but never by one head


def test_value_reach_splits_the_pairs_at_the_training_length():
    import pandas as pd

    frame = pd.DataFrame([{"n_pairs": 8, "layer": layer, "head": head, "pair": pair, "items": 10,
                           "mass": (0.8 if pair <= 4 else 0.1 + 0.1 * head) if layer == 2 else 0.5}
                          for layer in (1, 2) for head in (1, 2) for pair in range(1, 9)])
    out = probe.value_reach(frame, layer=2)
    assert out["inside"] == pytest.approx(0.8) and out["past"] == pytest.approx(0.25)
    assert probe.value_reach(frame, layer=1) == pytest.approx({"inside": 0.5, "past": 0.5})
    assert math.isnan(probe.value_reach(frame[frame.pair <= 4], layer=2)["past"])
    with pytest.raises(ValueError, match="layer 3"):
        probe.value_reach(frame, layer=3)


def test_the_committed_models_read_as_the_chapter_says():
    """On committed weights (seed 0): the learned table reads both digits of a column with
    one head, RoPE does not; RoPE's solved recall model still finds the value past the
    training length, the table's does not."""
    from llamanat_core import mechanism

    models = {v: mechanism.load_trained(v, "addition", 0)[0] for v in ("llama", "abs_pos")}
    reads = {v: probe.column_reads(mechanism.addition_attention(m, 0)) for v, m in models.items()}
    assert reads["abs_pos"].both.min() > 0.25 > 0.15 > reads["llama"].both.mean()
    reach = {}
    for v, seed in (("llama", 0), ("abs_pos", 2)):  # seeds that solved recall
        model = mechanism.load_trained(v, "recall", seed)[0]
        reach[v] = probe.value_reach(mechanism.recall_by_pair(model, seed, 8, n_items=100), layer=2)
    assert reach["llama"]["past"] > 0.5 > 0.1 > reach["abs_pos"]["past"]


def test_column_positions_are_where_the_encoder_puts_the_digits():
    from llamanat_core.tasks import DIGIT0, Addition

    ids = Addition.encode(123, 456)  # a = 1 2 3, b = 4 5 6
    pos = probe.column_positions()
    assert pos == {"units": (2, 6), "tens": (1, 5), "hundreds": (0, 4)}
    for col, digits in (("units", (3, 6)), ("tens", (2, 5)), ("hundreds", (1, 4))):
        assert tuple(ids[p] - DIGIT0 for p in pos[col]) == digits
