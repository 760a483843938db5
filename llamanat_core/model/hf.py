"""transformers interop: the same weights as a `LlamaForCausalLM`, and back.

Our parameter names already match transformers' Llama (embed_tokens, layers.i.self_attn.q_proj,
mlp.gate_proj, input_layernorm, post_attention_layernorm, norm, lm_head), so the conversion is a
plain state-dict copy with a "model." prefix on everything but the head.

Only the reference family has a LlamaForCausalLM equivalent: RMSNorm in pre-norm position,
rotary positions in the half-split pairing, SwiGLU. An interleaved model converts exactly once
its Q and K rows are permuted (`interleaved_to_half`).

Why the permutation works. Interleaved RoPE rotates the channel pairs (2i, 2i+1) of every head
by the angle m * theta^(-2i/d); half-split rotates the pairs (i, i + d/2) by the same angle.
Reorder the output rows of W_q and W_k so that half-split channel i is interleaved channel 2i
and channel i + d/2 is channel 2i + 1: every pair lands on the slots that half-split rotates
by its own angle, so the rotated vectors are the interleaved ones, reordered. A score q . k is a
sum over channels, and the same reordering of q and k leaves the sum unchanged. V and o_proj
never see the rotation, so nothing else moves and the logits are the same.
"""
from __future__ import annotations

import torch

from .config import Config
from .model import TinyLlama
from .positional import permute_qk_state

# Config fields whose non-reference values have no LlamaForCausalLM counterpart here
# (transformers' attention_bias/mlp_bias are not mapped: the `bias` control stays ours).
_SUPPORTED = {"norm": "rms", "norm_position": "pre", "position": "rope", "mlp": "swiglu",
              "bias": False}


def _dtype(module) -> torch.dtype:
    return next(module.parameters()).dtype  # a copy keeps the precision of its source


def _check_supported(cfg: Config) -> None:
    for name, value in _SUPPORTED.items():
        if getattr(cfg, name) != value:
            raise ValueError(f"Config.{name}={getattr(cfg, name)!r} has no LlamaForCausalLM "
                             f"equivalent (it needs {name}={value!r})")
    if cfg.rope_pairing != "half":
        raise ValueError("Config.rope_pairing='interleaved' is not transformers' convention: "
                         "convert with llamanat_core.model.hf.interleaved_to_half(model) first "
                         "(a fixed permutation of the Q/K rows, same logits)")


def llama_config(cfg: Config):
    """The LlamaConfig describing the same architecture as our Config."""
    from transformers import LlamaConfig  # transformers is heavy: loaded only to convert

    _check_supported(cfg)
    return LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_seq_len, rms_norm_eps=cfg.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg.rope_theta)},
        tie_word_embeddings=cfg.tie_embeddings, attention_bias=False, mlp_bias=False,
        hidden_act="silu", initializer_range=cfg.init_std,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation="eager")


def to_transformers(model: TinyLlama):
    """A `LlamaForCausalLM` (eager attention, eval mode) holding a copy of our weights."""
    from transformers import LlamaForCausalLM  # heavy: loaded only to convert

    hf = LlamaForCausalLM(llama_config(model.cfg)).to(_dtype(model))
    state = {(k if k.startswith("lm_head.") else f"model.{k}"): v.detach().clone()
             for k, v in model.state_dict().items()}
    hf.load_state_dict(state, strict=True)
    return hf.eval()


def config_from_transformers(hf_config, **overrides) -> Config:
    """Our Config for a LlamaConfig; ValueError for what TinyLlama cannot express."""
    rope = dict(getattr(hf_config, "rope_parameters", None) or {})
    checks = {"hidden_act": ("silu", hf_config.hidden_act),
              "attention_bias": (False, hf_config.attention_bias),
              "mlp_bias": (False, hf_config.mlp_bias),
              "rope_parameters['rope_type']": ("default", rope.get("rope_type", "default"))}
    for name, (want, got) in checks.items():
        if got != want:
            raise ValueError(f"LlamaConfig.{name}={got!r} has no TinyLlama equivalent "
                             f"(it needs {want!r})")
    head_dim = getattr(hf_config, "head_dim", None) or (
        hf_config.hidden_size // hf_config.num_attention_heads)
    return Config(
        vocab_size=hf_config.vocab_size, d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers, n_heads=hf_config.num_attention_heads,
        n_kv_heads=hf_config.num_key_value_heads, head_dim=head_dim,
        d_ff=hf_config.intermediate_size, max_seq_len=hf_config.max_position_embeddings,
        norm_eps=hf_config.rms_norm_eps, rope_theta=rope.get("rope_theta", 10_000.0),
        tie_embeddings=bool(hf_config.tie_word_embeddings),
        init_std=hf_config.initializer_range, **overrides)


def from_transformers(hf_model, **overrides) -> TinyLlama:
    """The reverse of `to_transformers`: a TinyLlama (eval mode) with a copy of the weights.

    `overrides` set Config fields transformers does not carry (e.g. attention="manual").
    """
    model = TinyLlama(config_from_transformers(hf_model.config, **overrides), seed=None)
    model = model.to(_dtype(hf_model))
    state = {k.removeprefix("model."): v.detach().clone() for k, v in hf_model.state_dict().items()}
    model.load_state_dict(state, strict=True)
    return model.eval()


def _convert_pairing(model: TinyLlama, to: str) -> TinyLlama:
    cfg = model.cfg
    if cfg.position != "rope":
        raise ValueError(f"Config.position={cfg.position!r}: only rotary models have a pairing")
    if cfg.rope_pairing == to:
        raise ValueError(f"Config.rope_pairing is already {to!r}")
    out = TinyLlama(cfg.replace(rope_pairing=to), seed=None).to(_dtype(model))
    state = permute_qk_state(model.state_dict(), cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, to=to)
    out.load_state_dict(state, strict=True)  # load_state_dict copies: nothing is shared
    return out.train(model.training)


def interleaved_to_half(model: TinyLlama) -> TinyLlama:
    """A new half-split model with the Q/K rows permuted: the same logits."""
    return _convert_pairing(model, "half")


def half_to_interleaved(model: TinyLlama) -> TinyLlama:
    """A new interleaved model with the Q/K rows permuted back: the same logits."""
    return _convert_pairing(model, "interleaved")


__all__ = ["to_transformers", "from_transformers", "llama_config", "config_from_transformers",
           "interleaved_to_half", "half_to_interleaved"]
