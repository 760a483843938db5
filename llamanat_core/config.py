"""The one frozen configuration and the table of controls (SPEC §3, §4).

Every control replaces exactly one field of the reference, so two rows of any
table differ in one mechanism and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

NORMS = ("rms", "layer")
NORM_POSITIONS = ("pre", "post", "none")
POSITIONS = ("rope", "learned")
PAIRINGS = ("half", "interleaved")
MLPS = ("swiglu", "gelu")
ATTENTION = ("sdpa", "manual")


@dataclass(frozen=True)
class Config:
    vocab_size: int = 61
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4  # query heads
    n_kv_heads: int = 2  # key/value heads (GQA: 2 query heads share one)
    head_dim: int = 16
    d_ff: int = 192  # SwiGLU hidden width
    max_seq_len: int = 48  # sizes the learned position table of the control
    norm: str = "rms"
    norm_position: str = "pre"
    norm_eps: float = 1e-5
    position: str = "rope"
    rope_theta: float = 10_000.0
    rope_pairing: str = "half"
    mlp: str = "swiglu"
    gelu_ff: int = 288  # the control's two-matrix width: 1.5 x 192 matches SwiGLU
    tie_embeddings: bool = True
    attention: str = "sdpa"  # "manual" is the readable path; both give the same numbers
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                     "head_dim", "d_ff", "max_seq_len", "gelu_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Config.{name} must be a positive integer, got {value!r}")
        for name in ("norm_eps", "rope_theta", "init_std"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or (name != "norm_eps" and value == 0):
                raise ValueError(f"Config.{name} must be a positive number, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"Config.n_heads ({self.n_heads}) must be divisible by "
                f"Config.n_kv_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"Config.head_dim must be even for rotary pairs, got {self.head_dim}")
        for name, allowed in (("norm", NORMS), ("norm_position", NORM_POSITIONS),
                              ("position", POSITIONS), ("rope_pairing", PAIRINGS),
                              ("mlp", MLPS), ("attention", ATTENTION)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"Config.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"Config.tie_embeddings must be a bool, got {self.tie_embeddings!r}")

    @property
    def n_rep(self) -> int:
        """How many query heads read each key/value head."""
        return self.n_heads // self.n_kv_heads

    def replace(self, **changes) -> Config:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ValueError(f"unknown Config field(s): {sorted(unknown)}")
        return replace(self, **changes)


REFERENCE = Config()

# Each control replaces exactly one field of the reference (SPEC §4).
VARIANTS: dict[str, dict] = {
    "llama": {},
    "layernorm": {"norm": "layer"},
    "postnorm": {"norm_position": "post"},
    "abs_pos": {"position": "learned"},
    "gelu_mlp": {"mlp": "gelu"},
    "mha": {"n_kv_heads": 4},
    "mqa": {"n_kv_heads": 1},
    "untied": {"tie_embeddings": False},  # alphabet control only
}

# The trained matrix (SPEC §7): every variant but `untied`.
MATRIX_VARIANTS = tuple(v for v in VARIANTS if v != "untied")

# Exact parameter counts with tied embeddings and vocab 61 (SPEC §4).
EXPECTED_PARAMETERS = {
    "llama": 102_528, "layernorm": 102_848, "postnorm": 102_528, "abs_pos": 105_600,
    "gelu_mlp": 102_528, "mha": 110_720, "mqa": 98_432, "untied": 106_432,
}


def variant_config(name: str, **overrides) -> Config:
    """The reference with one variant's field replaced (plus optional overrides)."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {sorted(VARIANTS)}")
    return REFERENCE.replace(**VARIANTS[name], **overrides)
