"""The model layer: the one frozen `Config` and its variants, the decoder's blocks (RMSNorm,
attention, RoPE, the MLPs), `TinyLlama`, the runtime KV cache, the published LLaMA
configurations and their arithmetic, and the bridge to transformers' `LlamaForCausalLM`.
It may import the core (`paths`, `util`) and itself; today it needs neither: a model is
built from a `Config` alone."""
