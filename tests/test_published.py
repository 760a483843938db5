"""The published LLaMA configurations and their arithmetic, checked by hand: cache bytes,
feed-forward widths (the configs', not the rule's) and exact parameter counts."""
from llamanat_core.model.published import (
    PUBLISHED,
    PublishedModel,
    kv_cache_bytes,
    llama_ffn_rule,
    llama_parameters,
)


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
