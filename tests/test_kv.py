"""Cached greedy generation equals recomputation exactly, and the cache holds the bytes
`published.kv_cache_bytes` says."""
import pytest
import torch

from llamanat_core import VARIANTS, TinyLlama, variant_config
from llamanat_core.data.tasks import Recall
from llamanat_core.model.kv import KVCache, greedy_decode
from llamanat_core.model.published import kv_cache_bytes
from llamanat_core.train.loop import Budget, TaskSpec, fit

N_NEW = 11  # 8-pair prompts are 25 tokens: 36 positions, inside the learned table of 48


@pytest.fixture(scope="module")
def prompts():
    return Recall(seed=1, n_pairs=8).splits(0, 0, 24).test.prompt  # (24, 25)


@pytest.fixture(scope="module")
def trained():
    """Each variant after 30 recall steps, so greedy generations are not constant; trained
    when a test first asks for it (a worker trains only the variants its tests read)."""
    budget = Budget(steps=30, min_steps=30, eval_every=10, n_train=256, n_val=16, n_test=16,
                    checkpoints=(30,))
    models = {}

    def model(variant):
        if variant not in models:
            models[variant] = fit(variant_config(variant), TaskSpec("recall"), 0, budget).model
        return models[variant]
    return model


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
    out = check_cached_equals_recompute(trained(variant), prompts)
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


def test_capacity_overflow_raises():
    model = TinyLlama(variant_config("llama")).eval()
    cache = KVCache.for_model(model.cfg, batch=1, capacity=10)
    with torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="capacity 10"):
            model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="capacity"):
            model(torch.zeros(1, 11, dtype=torch.long), cache=KVCache.for_model(model.cfg, 1, 10))
