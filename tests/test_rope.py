"""RoPE depends on the offset only, keeps norms, touches Q and K but never V, the two
pairings are one permutation apart, and the slowest-period arithmetic.

Each property is tested once, here, on the package and on the RoPE chapter's probe that
shows it (llamanat_core.book.helpers.rope); tests/test_helpers_rope.py covers the rest of the helper."""
import math

import pytest
import torch

import llamanat_core.model.blocks as blocks
from llamanat_core import TinyLlama, variant_config
from llamanat_core.book.helpers import rope as probe
from llamanat_core.model.hf import half_to_interleaved, interleaved_to_half
from llamanat_core.model.positional import (
    RotaryEmbedding,
    apply_rotary,
    interleaved_to_half_permutation,
    inverse_frequencies,
    permute_qk_rows,
    permute_qk_state,
    slowest_period,
)

PAIRINGS = ("half", "interleaved")


def rotated(x: torch.Tensor, position: int, rope: RotaryEmbedding) -> torch.Tensor:
    cos, sin = rope(position, 1)
    return apply_rotary(x[None], cos, sin, rope.pairing)[0]


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_score_depends_only_on_offset(pairing):
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    rope = RotaryEmbedding(16, 10_000.0, pairing, 64)

    def score(m, n):
        return torch.dot(rotated(q, m, rope), rotated(k, n, rope)).item()

    for offset in (0, 1, 3, 17):
        scores = [score(n + offset, n) for n in (0, 2, 9, 30, 45)]
        assert max(scores) - min(scores) <= 1e-5, (offset, scores)
    assert score(0, 0) == pytest.approx(torch.dot(q, k).item(), abs=1e-6)  # position 0: no turn
    # the check can fail: a different offset gives a different score
    assert abs(score(3, 0) - score(1, 0)) > 1e-2
    # the chapter's table of scores (query at m, key at n) is constant along every diagonal
    table = probe.offset_scores(n=12, seed=4, pairing=pairing)
    assert probe.diagonal_deviation(table) < 1e-4
    assert (table.max() - table.min()).item() > 0.5


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rotation_preserves_norms(pairing):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 40, 16, generator=g)  # (B, H, T, D)
    cos, sin = RotaryEmbedding(16, 10_000.0, pairing, 64)(0, 40)
    y = apply_rotary(x, cos, sin, pairing)
    assert not torch.allclose(x[:, :, 1:], y[:, :, 1:], atol=1e-3)  # it does rotate
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-6, atol=1e-5)
    assert probe.norm_change(n_vectors=32, positions=48, pairing=pairing) < 1e-5  # the chapter's number


def test_pairings_pair_the_documented_channels():
    x = torch.zeros(1, 8)
    x[0, 0] = 1.0
    for pairing, partner in (("half", 4), ("interleaved", 1)):
        cos, sin = RotaryEmbedding(8, 10_000.0, pairing, 4)(1, 1)
        y = apply_rotary(x, cos, sin, pairing)[0]
        moved = {i for i in range(8) if abs(y[i]) > 1e-6}
        assert moved == {0, partner}, pairing  # channel 0 turns into its partner and nowhere else
        assert y[0] == pytest.approx(math.cos(1.0)) and y[partner] == pytest.approx(math.sin(1.0))


def _record_attention_inputs(monkeypatch, model, ids):
    """Run the manual attention path, recording the q, k, v that reach the scores."""
    seen = []
    original = blocks.manual_attention

    def recording(q, k, v, mask):
        seen.append((q.detach().clone(), k.detach().clone(), v.detach().clone()))
        return original(q, k, v, mask)

    monkeypatch.setattr(blocks, "manual_attention", recording)
    with torch.no_grad():
        model(ids)
    monkeypatch.undo()
    return seen


def test_values_are_never_rotated(monkeypatch):
    ids = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(2))
    runs = {}
    for theta in (10.0, 10_000.0):
        cfg = variant_config("llama", attention="manual", rope_theta=theta)
        model = TinyLlama(cfg).eval()
        attn = model.layers[0].self_attn
        x = model.layers[0].input_layernorm(model.embed_tokens(ids)).detach()  # layer 0 input
        q, k, v = _record_attention_inputs(monkeypatch, model, ids)[0]
        with torch.no_grad():
            raw_q = attn.q_proj(x).view(2, 12, 4, 16).transpose(1, 2)
            raw_k = blocks.repeat_kv(attn.k_proj(x).view(2, 12, 2, 16).transpose(1, 2), 2)
            raw_v = blocks.repeat_kv(attn.v_proj(x).view(2, 12, 2, 16).transpose(1, 2), 2)
        # V reaches attention exactly as v_proj wrote it, at every position
        assert torch.equal(v, raw_v)
        # Q and K are rotated: untouched at position 0 (angle 0), changed after it
        torch.testing.assert_close(q[:, :, 0], raw_q[:, :, 0], rtol=0, atol=1e-7)
        torch.testing.assert_close(k[:, :, 0], raw_k[:, :, 0], rtol=0, atol=1e-7)
        assert (q[:, :, 1:] - raw_q[:, :, 1:]).abs().max() > 1e-3
        assert (k[:, :, 1:] - raw_k[:, :, 1:]).abs().max() > 1e-3
        runs[theta] = (q, k, v)
    # the base changes what Q and K carry, never V (same weights: same seed, RoPE has none)
    assert torch.equal(runs[10.0][2], runs[10_000.0][2])
    assert (runs[10.0][0] - runs[10_000.0][0]).abs().max() > 1e-3
    assert (runs[10.0][1] - runs[10_000.0][1]).abs().max() > 1e-3


def test_unrotated_values_make_the_layer_shift_invariant_and_rotated_ones_would_not():
    # the chapter's consequence: with V unrotated, shifting every position changes nothing and
    # identical tokens give identical outputs; the counterfactual that rotates V breaks both
    c = probe.value_checks(seed=0)
    assert c["shift_real"] < 1e-5 and c["same_content_real"] < 1e-5
    assert c["shift_rotated_v"] > 1e-2 and c["same_content_rotated_v"] > 1e-2


def test_permutation_is_a_permutation_and_inverts():
    perm = interleaved_to_half_permutation(8)
    assert perm.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    w = torch.randn(3 * 8, 5)
    back = permute_qk_rows(permute_qk_rows(w, 3, 8, to="half"), 3, 8, to="interleaved")
    assert torch.equal(back, w)
    with pytest.raises(ValueError, match="to must be"):
        permute_qk_rows(w, 3, 8, to="sideways")
    # on a whole model: Q rows per query head, K rows per KV head, nothing else touched
    state = TinyLlama(variant_config("llama")).state_dict()
    moved = permute_qk_state(state, 4, 2, 16, to="half")
    for name, w in state.items():
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = 4 if "q_proj" in name else 2
            assert torch.equal(moved[name], w.view(heads, 16, 64)[:, interleaved_to_half_permutation(16)]
                               .reshape(-1, 64)), name
        else:
            assert moved[name] is w, name


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 61, (3, 40), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("variant", ["llama", "mha", "mqa"])
def test_half_and_interleaved_give_the_same_logits(variant, ids):
    half = TinyLlama(variant_config(variant)).eval()
    inter = half_to_interleaved(half)
    assert inter.cfg == half.cfg.replace(rope_pairing="interleaved")
    with torch.no_grad():
        ref, out = half(ids), inter(ids)
        assert (ref - out).abs().max() <= 1e-6
        # the check can fail: the same weights without the permutation move the logits
        unpermuted = TinyLlama(inter.cfg, seed=None)
        unpermuted.load_state_dict(half.state_dict())
        assert (ref - unpermuted.eval()(ids)).abs().max() > 1e-3
    back = interleaved_to_half(inter)  # the other direction is exact: a permutation and its inverse
    assert back.cfg == half.cfg
    for (name, a), b in zip(half.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), name


def test_pairing_equivalence_with_sharp_attention(ids):
    # large weights make attention sharp, so a wrong pairing would show; float64 removes rounding
    inter = TinyLlama(variant_config("llama", rope_pairing="interleaved", init_std=0.3)).double().eval()
    with torch.no_grad():
        assert (inter(ids) - interleaved_to_half(inter)(ids)).abs().max() <= 1e-10
    # the chapter's version in float32: permuted rows match, the unpermuted control is far off
    out = probe.pairing_logits(seed=1, batch=2, length=13)
    assert out["permuted"] < 1e-4 and out["unpermuted"] > 1e-2


def test_pairing_conversion_errors():
    half = TinyLlama(variant_config("llama"))
    with pytest.raises(ValueError, match="rope_pairing"):
        interleaved_to_half(half)
    with pytest.raises(ValueError, match="position"):
        half_to_interleaved(TinyLlama(variant_config("abs_pos")))


@pytest.mark.parametrize("theta, by_hand, known", [
    (10.0, 2 * math.pi * 10 ** 0.875, None),
    (100.0, 2 * math.pi * 10 ** 1.75, 353.33),
    (10_000.0, 2 * math.pi * 10 ** 3.5, 19_869.2),
    (1_000_000.0, 2 * math.pi * 10 ** 5.25, None),
])
def test_slowest_period(theta, by_hand, known):
    assert slowest_period(16, theta) == pytest.approx(by_hand, rel=1e-12)
    if known is not None:  # the figures the sweep chapter quotes
        assert slowest_period(16, theta) == pytest.approx(known, abs=0.01 if known < 1000 else 0.1)
    # it is the period of the slowest pair of the actual rotary table
    slowest_freq = inverse_frequencies(16, theta).double().min().item()
    assert slowest_period(16, theta) == pytest.approx(2 * math.pi / slowest_freq, rel=1e-6)
    assert slowest_period(2, theta) == pytest.approx(2 * math.pi)  # d=2: one pair, unit speed
