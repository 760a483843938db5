"""The GQA chapter's probes (repeat_kv read and checked) and the cross-task ordering sentence."""
import pandas as pd
import pytest

from llamanat_core.config import EXPECTED_PARAMETERS
from llamanat_core.probes import gqa
from llamanat_core.report import mean_order, orderings_sentence, seed_table


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
    assert dict(zip(t.variant, t["model parameters"])) == {
        v: EXPECTED_PARAMETERS[v] for v in ("mha", "llama", "mqa")}
    # 2 (K, V) x 2 layers x KV heads x 16 channels x 2 bytes
    assert list(t["KV-cache bytes per token (fp16)"]) == [512, 256, 128]
    assert gqa.head_map_table().loc["GQA"].tolist() == [0, 0, 1, 1]


def _frame(acc: dict) -> pd.DataFrame:
    """acc: {(task, variant): [acc per seed]} -> a results-like frame at one checkpoint."""
    rows = [{"task": t, "variant": v, "seed": s, "test_acc": a, "final": True, "step": 10}
            for (t, v), vals in acc.items() for s, a in enumerate(vals)]
    return pd.DataFrame(rows)


def test_mean_order_marks_ties():
    df = _frame({("recall", "a"): [1.0, 1.0], ("recall", "b"): [0.5, 0.7], ("recall", "c"): [1.0, 1.0]})
    assert mean_order(seed_table(df, "variant", order=["b", "a", "c"])) == \
        "a (100.0%) = c (100.0%) > b (60.0%)"


def test_orderings_sentence_same_decided_flip_and_noise():
    same = _frame({("addition", "x"): [0.9, 0.91, 0.92], ("addition", "y"): [0.5, 0.5, 0.52],
                   ("recall", "x"): [0.8, 0.81, 0.8], ("recall", "y"): [0.2, 0.21, 0.2]})
    s = orderings_sentence(same, "variant", ["x", "y"])
    assert "same order" in s and "every pairwise gap" in s
    real = _frame({("addition", "x"): [0.9, 0.91, 0.92], ("addition", "y"): [0.5, 0.5, 0.52],
                   ("recall", "x"): [0.2, 0.21, 0.2], ("recall", "y"): [0.8, 0.81, 0.8]})
    s = orderings_sentence(real, "variant", ["x", "y"])
    assert "swap places" in s and "depends on the task" in s
    noise = _frame({("addition", "x"): [0.9, 0.1, 0.6], ("addition", "y"): [0.5, 0.5, 0.52],
                    ("recall", "x"): [0.2, 0.21, 0.2], ("recall", "y"): [0.8, 0.81, 0.8]})
    s = orderings_sentence(noise, "variant", ["x", "y"])
    assert "swap places" in s and "No swap is decided" in s and "which is better depends" not in s
    ties = _frame({("addition", "x"): [1.0, 1.0], ("addition", "y"): [1.0, 1.0],
                   ("addition", "z"): [1.0, 1.0], ("recall", "x"): [0.9, 0.8],
                   ("recall", "y"): [0.5, 0.6], ("recall", "z"): [0.9, 0.8]})
    s = orderings_sentence(ties, "variant", ["x", "y", "z"])
    assert "Addition does not separate the rows at all" in s and "only recall orders them" in s
    partial = _frame({("addition", "x"): [1.0, 1.0], ("addition", "y"): [1.0, 1.0],
                      ("addition", "z"): [0.2, 0.1], ("recall", "x"): [0.9, 0.8],
                      ("recall", "y"): [0.5, 0.6], ("recall", "z"): [0.1, 0.0]})
    s = orderings_sentence(partial, "variant", ["x", "y", "z"])
    assert "one task ties rows the other separates" in s and "x (100.0%) = y (100.0%) > z" in s
    flat = _frame({(t, v): [0.0, 0.0] for t in ("addition", "recall") for v in "xy"})
    assert "Neither task separates" in orderings_sentence(flat, "variant", ["x", "y"])
