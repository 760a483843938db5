"""transformers parity and the weights round trip through LlamaForCausalLM (tested here only)."""
import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.data.tasks import Recall
from llamanat_core.model.hf import from_transformers, interleaved_to_half, to_transformers
from llamanat_core.train.loop import Budget, TaskSpec, fit

PARITY_VARIANTS = ("llama", "mha", "mqa")
# (name, state): the three attention layouts at init and after 50 training steps on recall,
# then untied embeddings and a non-default RoPE base at init
CASES = [(v, s) for v in PARITY_VARIANTS for s in ("init", "trained")] + [
    ("untied", "init"), ("theta100", "init")]


@pytest.fixture(scope="module")
def models():
    """(name, state) -> model (eval mode)."""
    out = {}
    for v in PARITY_VARIANTS:
        cfg = variant_config(v)
        out[v, "init"] = TinyLlama(cfg).eval()
        out[v, "trained"] = fit(cfg, TaskSpec("recall"), 0, Budget.for_steps(50)).model.eval()
    out["untied", "init"] = TinyLlama(variant_config("untied")).eval()
    out["theta100", "init"] = TinyLlama(variant_config("llama", rope_theta=100.0)).eval()
    return out


@pytest.fixture(scope="module")
def ids():
    random = torch.randint(0, 61, (4, 48), generator=torch.Generator().manual_seed(0))  # full length
    recall = Recall(seed=2, n_pairs=12).splits(0, 0, 4).test.ids[:, :-1]  # real prompts, 37 tokens
    return random, recall


def max_delta(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("name, state", CASES)
def test_logits_match_transformers(name, state, models, ids):
    ours = models[name, state]
    hf = to_transformers(ours)
    assert type(hf).__name__ == "LlamaForCausalLM" and not hf.training
    assert hf.config._attn_implementation == "eager"
    assert (hf.lm_head.weight is hf.model.embed_tokens.weight) == ours.cfg.tie_embeddings
    assert hf.config.num_key_value_heads == ours.cfg.n_kv_heads
    assert hf.config.rope_parameters["rope_theta"] == ours.cfg.rope_theta
    with torch.no_grad():
        for x in ids:
            assert max_delta(hf(x).logits, ours(x)) <= 1e-5
    if state == "trained":  # the trained weights are not the initial ones
        assert max_delta(models[name, "trained"](ids[0]), models[name, "init"](ids[0])) > 1e-2


@pytest.mark.parametrize("name, state", CASES)
def test_round_trip_is_exact(name, state, models, ids):
    ours = models[name, state]
    back = from_transformers(to_transformers(ours))
    assert back.cfg == ours.cfg
    mine, theirs = ours.state_dict(), back.state_dict()
    assert mine.keys() == theirs.keys()
    for key in mine:
        assert torch.equal(mine[key], theirs[key]), key
    assert (back.lm_head.weight is back.embed_tokens.weight) == ours.cfg.tie_embeddings
    with torch.no_grad():
        for x in ids:
            assert torch.equal(back(x), ours(x))


def test_conversion_copies_rather_than_shares(models):
    ours = models["llama", "init"]
    hf = to_transformers(ours)
    with torch.no_grad():
        hf.model.layers[0].self_attn.q_proj.weight.add_(1.0)
    assert not torch.equal(hf.model.layers[0].self_attn.q_proj.weight, ours.layers[0].self_attn.q_proj.weight)


def test_interleaved_model_reaches_transformers_through_the_permutation(ids):
    inter = TinyLlama(variant_config("llama", rope_pairing="interleaved")).eval()
    with pytest.raises(ValueError, match="interleaved_to_half"):
        to_transformers(inter)
    hf = to_transformers(interleaved_to_half(inter))
    with torch.no_grad():
        assert max_delta(hf(ids[0]).logits, inter(ids[0])) <= 1e-5


@pytest.mark.parametrize("cfg, field", [
    (variant_config("layernorm"), r"Config\.norm="),
    (variant_config("postnorm"), r"Config\.norm_position="),
    (variant_config("llama", norm_position="none"), r"Config\.norm_position="),
    (variant_config("abs_pos"), r"Config\.position="),
    (variant_config("gelu_mlp"), r"Config\.mlp="),
    (variant_config("bias"), r"Config\.bias="),
    (variant_config("llama", rope_pairing="interleaved"), r"Config\.rope_pairing="),
])
def test_unsupported_variants_raise(cfg, field):
    with pytest.raises(ValueError, match=field):
        to_transformers(TinyLlama(cfg))


def test_from_transformers_rejects_what_tinyllama_cannot_express(models):
    hf = to_transformers(models["llama", "init"])
    hf.config.attention_bias = True
    with pytest.raises(ValueError, match="attention_bias"):
        from_transformers(hf)


def _greedy_hf(hf, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """transformers' own greedy generation from `prompt` (T,) -> the n new token ids."""
    out = hf.generate(prompt[None], attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                      max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[0, len(prompt):]


def test_a_kept_text_model_writes_the_same_characters_in_transformers():
    """The first text study's kept reference, converted, writes greedily the same 40
    characters as our cached sampler from a prompt of the held-out test half (8 + 40
    characters: inside the trained window, where our sampler never refills its cache).
    The same weights under a wrong rotation base write something else."""
    from transformers import LlamaForCausalLM

    from llamanat_core.book.helpers.text import reference_text_model
    from llamanat_core.data.text import decode, load_corpus
    from llamanat_core.model.hf import llama_config
    from llamanat_core.train.sampling import sample_text

    ours = reference_text_model("llama")
    prompt = load_corpus().test[3000:3008]  # (8,)
    mine = sample_text(ours, prompt, 40, temperature=0.0)
    hf = to_transformers(ours)
    theirs = _greedy_hf(hf, prompt, 40)
    assert decode(theirs) == decode(mine) and len(mine) == 40
    wrong = LlamaForCausalLM(llama_config(ours.cfg.replace(rope_theta=500_000.0))).eval()
    wrong.load_state_dict(hf.state_dict())
    assert decode(_greedy_hf(wrong, prompt, 40)) != decode(mine)
