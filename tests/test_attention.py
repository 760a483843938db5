"""The manual, SDPA and elementwise attention paths agree, GQA is repeat_kv (the one place repeat_kv is
tested), and attention is causal."""
import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.model.blocks import causal_mask, repeat_kv
from llamanat_core.model.kv import KVCache
from llamanat_core.model.positional import apply_rotary, inverse_frequencies

KINDS = {"mha": 4, "llama": 2, "mqa": 1}  # variant -> KV heads (MHA, GQA, MQA)


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 61, (3, 40), generator=torch.Generator().manual_seed(0))


def pair(variant, **overrides):
    sdpa = TinyLlama(variant_config(variant, **overrides), seed=5).eval()
    manual = TinyLlama(variant_config(variant, attention="manual", **overrides), seed=5).eval()
    for (name, a), b in zip(sdpa.state_dict().items(), manual.state_dict().values()):
        assert torch.equal(a, b), name  # same seed, same weights: only the attention path differs
    return sdpa, manual


@pytest.mark.parametrize("variant", sorted(KINDS))
def test_manual_and_sdpa_agree(variant, ids):
    sdpa, manual = pair(variant)
    assert sdpa.cfg.n_kv_heads == KINDS[variant]
    with torch.no_grad():
        assert (sdpa(ids) - manual(ids)).abs().max() <= 1e-6


@pytest.mark.parametrize("variant", sorted(KINDS))
def test_manual_and_sdpa_agree_with_sharp_attention(variant, ids):
    # large weights: peaked attention and logits of ~10, so agree to float32 rounding of that scale
    sdpa, manual = pair(variant, init_std=0.3)
    with torch.no_grad():
        ref = sdpa(ids)
        assert (ref - manual(ids)).abs().max() <= 5e-6 * ref.abs().max()


@pytest.mark.parametrize("variant", sorted(KINDS))
def test_elementwise_attention_is_the_manual_path(variant, ids):
    """The compiled step's attention: the same sums as broadcast products, so the same
    outputs to float32 rounding (sharp attention, logits of ~10), and not a copy of the
    manual path (a dropped 1/sqrt(d) would show)."""
    cfg = variant_config(variant, attention="manual", init_std=0.3)
    manual = TinyLlama(cfg, seed=5).eval()
    elementwise = TinyLlama(cfg.replace(attention="elementwise"), seed=5).eval()
    with torch.no_grad():
        ref, out = manual(ids), elementwise(ids)
    assert (ref - out).abs().max() <= 5e-6 * ref.abs().max()


@pytest.mark.parametrize("attention", ["sdpa", "manual", "elementwise"])
def test_chunked_prefill_with_cache_matches_full_pass(attention, ids):
    # chunks of 1 (one query, every key), 8 and 31 (a causal mask offset by the cache length)
    model = TinyLlama(variant_config("llama", attention=attention, init_std=0.1)).eval()
    cache = KVCache.for_model(model.cfg, 3, 40)
    with torch.no_grad():
        full = model(ids)
        parts = [model(ids[:, a:b], cache=cache) for a, b in ((0, 1), (1, 9), (9, 40))]
    assert cache.length == 40
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("attention", ["sdpa", "manual", "elementwise"])
@pytest.mark.parametrize("variant", sorted(KINDS))
def test_returned_weights_are_the_softmax_of_the_scores(variant, attention, ids):
    """Attention(..., return_weights=True) returns softmax(q kᵀ / √D) under the causal mask,
    written out here from the layer's own projections, and the same output as without it."""
    model = TinyLlama(variant_config(variant, attention=attention, init_std=0.3), seed=5).eval()
    attn, cfg = model.layers[0].self_attn, model.cfg
    with torch.no_grad():
        x = model.embed_tokens(ids)  # (B, T, C)
        b, t, _ = x.shape
        rope = model.rotary(0, t)
        out = attn(x, rope)
        out_w, w = attn(x, rope, return_weights=True)
        q = attn.q_proj(x).view(b, t, cfg.n_heads, cfg.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(b, t, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, *rope, cfg.rope_pairing), apply_rotary(k, *rope, cfg.rope_pairing)
        scores = q @ repeat_kv(k, cfg.n_rep).transpose(-2, -1) / cfg.head_dim ** 0.5
        expected = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    assert w.shape == (b, cfg.n_heads, t, t)
    torch.testing.assert_close(w, expected, rtol=0, atol=1e-6)
    uniform = torch.ones(t, t).tril() / torch.arange(1, t + 1)[:, None]
    assert (w - uniform).abs().max() > 0.3  # peaked maps: a wrong map could not match by accident
    if attention == "manual":
        assert torch.equal(out_w, out)  # the same computation, bit for bit
    torch.testing.assert_close(out_w, out, rtol=1e-5, atol=1e-5)


def test_causal_mask_shape_and_offset():
    assert causal_mask(3, 3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # two new queries after three cached keys sit at positions 3 and 4
    assert causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


@pytest.mark.parametrize("n_kv, n_rep", [(4, 1), (2, 2), (1, 4)])
def test_repeat_kv_maps_query_head_to_kv_head(n_kv, n_rep):
    x = torch.arange(n_kv, dtype=torch.float32).view(1, n_kv, 1, 1).expand(2, n_kv, 5, 3).clone()
    x += torch.randn(2, n_kv, 5, 3) * 1e-3  # distinct content per head, position and channel
    y = repeat_kv(x, n_rep)
    assert y.shape == (2, n_kv * n_rep, 5, 3)
    for h in range(n_kv * n_rep):
        assert torch.equal(y[:, h], x[:, h // n_rep]), h
    if n_rep == 1:
        assert y is x  # MHA: nothing to repeat, no copy


def test_gqa_equals_mha_with_duplicated_kv_heads(ids):
    # GQA is MHA whose query head h reads KV head h // n_rep: copy each KV head's rows n_rep times
    gqa = TinyLlama(variant_config("llama", init_std=0.1)).eval()
    mha = TinyLlama(variant_config("mha"), seed=None).eval()
    state = gqa.state_dict()
    for name, w in list(state.items()):
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            state[name] = w.view(2, 1, 16, 64).expand(2, 2, 16, 64).reshape(64, 64)
    mha.load_state_dict(state)
    with torch.no_grad():
        assert (gqa(ids) - mha(ids)).abs().max() <= 1e-5
        # the check can fail: the other natural mapping (h % n_kv) gives other logits
        for name, w in gqa.state_dict().items():
            if name.endswith(("k_proj.weight", "v_proj.weight")):
                mha.state_dict()[name].copy_(w.repeat(2, 1))
        assert (gqa(ids) - mha(ids)).abs().max() > 1e-3


@pytest.mark.parametrize("attention", ["sdpa", "manual"])
def test_future_tokens_do_not_change_earlier_logits(attention, ids):
    model = TinyLlama(variant_config("llama", attention=attention, init_std=0.1)).eval()
    changed = ids.clone()
    changed[:, 20] = (changed[:, 20] + 7) % 61
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert torch.equal(a[:, :20], b[:, :20])
    assert (a[:, 20:] - b[:, 20:]).abs().amax(dim=-1).min() > 1e-4  # every later position moves


@pytest.mark.parametrize("attention", ["sdpa", "manual", "elementwise"])
def test_a_float64_model_computes_in_float64(attention, ids):
    """The norms and the softmax compute in at least float32, never below the input's type:
    in float64 the three attention paths agree to float64 rounding, which they could not if
    any step went through float32 (the chapters' illustrations rely on this)."""
    cfg = variant_config("llama", attention=attention)
    model32 = TinyLlama(cfg, seed=5).eval()
    model64 = TinyLlama(variant_config("llama", attention="sdpa"), seed=5).eval().double()
    with torch.no_grad():
        ref = model64(ids)
        out = TinyLlama(cfg, seed=5).eval().double()(ids)
        assert ref.dtype == out.dtype == torch.float64
        assert (out - ref).abs().max() <= 1e-12
        assert (model32(ids).double() - ref).abs().max() <= 1e-5  # float32: to its own rounding
    # the position tables too are float64 values, not converted float32 ones
    angles = torch.outer(torch.arange(model64.rotary.cos.shape[0], dtype=torch.float64),
                         inverse_frequencies(model64.cfg.head_dim, model64.cfg.rope_theta, torch.float64))
    assert torch.equal(model64.rotary.cos, torch.cat((angles, angles), dim=-1).cos())
    angles32 = torch.outer(torch.arange(model32.rotary.cos.shape[0], dtype=torch.float32),
                           inverse_frequencies(model32.cfg.head_dim, model32.cfg.rope_theta))
    assert torch.equal(model32.rotary.cos, torch.cat((angles32, angles32), dim=-1).cos())  # untouched
