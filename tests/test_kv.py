"""Cached greedy generation equals recomputation exactly; exact cache bytes; the published
LLaMA configurations the cache and parameter arithmetic use."""
import pytest
import torch

from llamanat_core import VARIANTS, TinyLlama, variant_config
from llamanat_core.kv import (
    PUBLISHED,
    KVCache,
    PublishedModel,
    greedy_decode,
    kv_cache_bytes,
    llama_ffn_rule,
    llama_parameters,
)
from llamanat_core.tasks import Recall
from llamanat_core.train import Budget, TaskSpec, fit

N_NEW = 11  # 8-pair prompts are 25 tokens: 36 positions, inside the learned table of 48


@pytest.fixture(scope="module")
def prompts():
    return Recall(seed=1, n_pairs=8).splits(0, 0, 24).test.prompt  # (24, 25)


@pytest.fixture(scope="module")
def trained():
    """Every variant after 30 recall steps, so greedy generations are not constant."""
    budget = Budget(steps=30, min_steps=30, eval_every=10, n_train=256, n_val=16, n_test=16,
                    checkpoints=(30,))
    return {v: fit(variant_config(v), TaskSpec("recall"), 0, budget).model for v in VARIANTS}


def check_cached_equals_recompute(model, prompts):
    model.eval()
    cached = model.generate(prompts, N_NEW, use_cache=True)
    recomputed = model.generate(prompts, N_NEW, use_cache=False)
    assert cached.shape == (len(prompts), N_NEW)
    assert torch.equal(cached, recomputed)
    return cached


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_generation_equals_recompute_random_init(variant, prompts):
    out = check_cached_equals_recompute(TinyLlama(variant_config(variant), seed=3), prompts)
    assert out.unique().numel() > 1


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_generation_equals_recompute_trained(variant, trained, prompts):
    out = check_cached_equals_recompute(trained[variant], prompts)
    assert len({tuple(row) for row in out.tolist()}) > 1  # not one constant generation


def test_greedy_decode_fills_a_larger_cache_with_the_recomputed_tokens(prompts):
    """(generate(use_cache=True) is greedy_decode through a cache sized to fit: tested above.)"""
    model = TinyLlama(variant_config("llama", init_std=0.3), seed=2).eval()
    cache = KVCache.for_model(model.cfg, len(prompts), 64)
    out = greedy_decode(model, prompts, N_NEW, cache)
    assert torch.equal(out, model.generate(prompts, N_NEW, use_cache=False))
    assert cache.length == prompts.shape[1] + N_NEW - 1  # the last token is produced, never fed


def test_cached_logits_match_recompute_step_by_step(prompts):
    model = TinyLlama(variant_config("llama", init_std=0.1)).eval()
    ids = torch.cat((prompts, model.generate(prompts, N_NEW)), dim=1)
    cache = KVCache.for_model(model.cfg, len(ids), ids.shape[1])
    with torch.no_grad():
        full = model(ids)
        steps = [model(ids[:, :25], cache=cache)] + [model(ids[:, t:t + 1], cache=cache)
                                                       for t in range(25, ids.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant", ["mha", "llama", "mqa"])
@pytest.mark.parametrize("dtype, width", [(torch.float32, 4), (torch.float16, 2)])
def test_cache_bytes_match_arithmetic(variant, dtype, width):
    cfg = variant_config(variant)
    model = TinyLlama(cfg).eval()
    cache = KVCache.for_model(cfg, batch=3, capacity=20, dtype=dtype)
    with torch.no_grad():
        model(torch.randint(0, 61, (3, 12)), cache=cache)
    assert cache.length == 12
    assert cache.nbytes() == kv_cache_bytes(2, cfg.n_kv_heads, 16, 12, batch=3, bytes_per_value=width)
    assert cache.nbytes(filled_only=False) == kv_cache_bytes(2, cfg.n_kv_heads, 16, 20, batch=3,
                                                             bytes_per_value=width)
    held = sum(t[:, :, :12].numel() * t.element_size() for t in cache.k + cache.v)
    assert held == cache.nbytes()
    for t in cache.k + cache.v:  # written exactly the filled prefix
        assert t.shape == (3, cfg.n_kv_heads, 20, 16) and t.dtype == dtype
        assert t[:, :, :12].abs().sum() > 0 and not t[:, :, 12:].any()


def test_kv_arithmetic_by_hand():
    # tiny model, batch 1, 2,048 positions, fp16: 2 x 2 layers x KV heads x 2048 x 16 x 2 bytes
    assert kv_cache_bytes(2, 4, 16, 2048) == 1_048_576  # MHA: 1 MiB
    assert kv_cache_bytes(2, 2, 16, 2048) == 524_288  # GQA
    assert kv_cache_bytes(2, 1, 16, 2048) == 262_144  # MQA
    by_name = {m.name: m for m in PUBLISHED}
    m7 = by_name["LLaMA-1 7B"]
    assert kv_cache_bytes(m7.n_layers, m7.n_kv_heads, m7.head_dim, m7.context) == 2 ** 30  # 1 GiB
    m70 = by_name["Llama-2-70B"]
    assert m70.head_dim == 128
    assert kv_cache_bytes(m70.n_layers, m70.n_kv_heads, m70.head_dim, m70.context) == 1_342_177_280


def test_published_feed_forward_widths_are_the_configs_not_the_rule():
    widths = {m.name: m.ffn_hidden for m in PUBLISHED}
    assert all(m.intermediate_size == m.ffn_hidden for m in PUBLISHED)  # every entry states it
    assert widths == {"LLaMA-1 7B": 11_008, "LLaMA-1 13B": 13_824, "LLaMA-1 33B": 17_920,
                      "LLaMA-1 65B": 22_016, "Llama-2-70B": 28_672}
    for m in PUBLISHED[:4]:  # LLaMA-1 follows the rule 256 * ceil(8d/3/256) ...
        assert llama_ffn_rule(m.dim) == m.intermediate_size
    m70 = PUBLISHED[4]  # ... Llama-2-70B does not: the rule gives 22,016
    assert llama_ffn_rule(m70.dim) == 22_016 != m70.intermediate_size
    assert llama_ffn_rule(m70.dim, multiple_of=4096, ffn_dim_multiplier=1.3) == 28_672  # Meta's code
    assert PublishedModel("hypothetical", 4096, 1, 1, 1, 1).ffn_hidden == 11_008  # no config: the rule
    # exact counts with the configs' widths: the papers' 6.7B and the 70B model's 68.98B
    assert llama_parameters(PUBLISHED[0]) == 6_738_415_616
    assert llama_parameters(m70) == 68_976_648_192


def test_capacity_overflow_raises():
    model = TinyLlama(variant_config("llama")).eval()
    cache = KVCache.for_model(model.cfg, batch=1, capacity=10)
    with torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="capacity 10"):
            model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="capacity"):
            model(torch.zeros(1, 11, dtype=torch.long), cache=KVCache.for_model(model.cfg, 1, 10))
