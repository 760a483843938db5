"""The one frozen configuration and the table of controls.

Every control replaces exactly one field of the reference, so two rows of any
table differ in one mechanism and nothing else. A new control is one call to
`register_variant` (see CONTRIBUTING.md), not an edit of these tables.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

NORMS = ("rms", "layer")
NORM_POSITIONS = ("pre", "post", "none")
POSITIONS = ("rope", "learned")
PAIRINGS = ("half", "interleaved")
# Gated (swiglu: SiLU gate, geglu: GELU gate) and two-matrix (gelu, silu) feed-forwards.
MLPS = ("swiglu", "geglu", "gelu", "silu")
ATTENTION = ("sdpa", "manual", "elementwise")
# The data regimes a run trains in: a fixed training set reused, or new items every batch.
REGIMES = ("finite", "fresh")


@dataclass(frozen=True)
class Config:
    """Every choice of the model, one field each (the reference's values by default).

    Frozen and hashable; `replace` gives a copy with fields replaced, and an impossible
    setting (heads not divisible by KV heads, an odd head_dim, a non-positive size, an
    unknown kind) raises ValueError naming the field. `variant_config` builds the variants.
    """
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
    gelu_ff: int = 288  # the two-matrix (gelu, silu) width: 1.5 x 192 matches SwiGLU
    tie_embeddings: bool = True
    bias: bool = False  # biases on every linear layer of the blocks (LLaMA has none)
    attention: str = "sdpa"  # "manual" is the readable path; all three give the same numbers
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
        for name in ("tie_embeddings", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Config.{name} must be a bool, got {getattr(self, name)!r}")

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

# The model sizes of the text study: S is the reference; M doubles the width (d_model, the
# query and key/value heads, both feed-forward widths), keeping head_dim and the
# query-to-KV-head ratio, so it has about four times the parameters.
SIZES: dict[str, dict] = {
    "S": {},
    "M": {"d_model": 128, "n_heads": 8, "n_kv_heads": 4, "d_ff": 384, "gelu_ff": 576},
}

# Each control replaces exactly one field of the reference (the changes of a control that
# depend on the size, like "as many KV heads as query heads", are a function of the base).
VARIANTS: dict[str, dict | Callable[[Config], dict]] = {}
# Exact parameter counts with tied embeddings and vocab 61 (a test asserts each).
EXPECTED_PARAMETERS: dict[str, int] = {}
# The trained matrix: every control that runs on both tasks in both data regimes.
MATRIX_VARIANTS: list[str] = []


def variant_changes(changes: dict | Callable[[Config], dict], base: Config) -> dict:
    """The Config fields a variant replaces, on `base`."""
    return dict(changes(base) if callable(changes) else changes)


def size_config(size: str = "S") -> Config:
    """The reference at one of the text study's `SIZES`."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {sorted(SIZES)}")
    return REFERENCE.replace(**SIZES[size])


def register_variant(name: str, changes: dict | Callable[[Config], dict],
                     parameters: int | None = None, matrix: bool = True) -> None:
    """Add a control: `changes` replaces Config fields of the reference (one, by design),
    or is a function of the base Config (of any size) giving those fields.

    `parameters`, if given, is the exact count a test and `llamanat params` check;
    `matrix=True` puts the variant in the study's matrix (both tasks, both regimes).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"variant name must be an identifier, got {name!r}")
    if name in VARIANTS:
        raise ValueError(f"variant {name!r} is already registered")
    for base in SIZES.values():  # unknown fields and impossible values fail here
        REFERENCE.replace(**base).replace(**variant_changes(changes, REFERENCE.replace(**base)))
    VARIANTS[name] = changes if callable(changes) else dict(changes)
    if parameters is not None:
        EXPECTED_PARAMETERS[name] = parameters
    if matrix:
        MATRIX_VARIANTS.append(name)


register_variant("llama", {}, 102_528)
register_variant("layernorm", {"norm": "layer"}, 102_848)
register_variant("postnorm", {"norm_position": "post"}, 102_528)
register_variant("abs_pos", {"position": "learned"}, 105_600)
register_variant("gelu_mlp", {"mlp": "gelu"}, 102_528)
register_variant("mha", lambda base: {"n_kv_heads": base.n_heads}, 110_720)
register_variant("mqa", {"n_kv_heads": 1}, 98_432)
register_variant("bias", {"bias": True}, 103_808)  # stated, not matched: biases add 1,280
register_variant("untied", {"tie_embeddings": False}, 106_432, matrix=False)  # alphabet only


def matched_d_ff(base: Config) -> int:
    """The SwiGLU width at which multi-head attention has the base's parameter count, as
    nearly as whole units allow: MHA's extra K/V rows, paid for with feed-forward units
    (3 · d_model parameters each, per layer)."""
    extra_kv = 2 * base.d_model * base.head_dim * (base.n_heads - base.n_kv_heads)  # per layer
    return base.d_ff - round(extra_kv / (3 * base.d_model))


# Controls of the text study only: they separate what the matrix's controls confound.
register_variant("mha_matched", lambda base: {"n_kv_heads": base.n_heads, "d_ff": matched_d_ff(base)},
                 102_656, matrix=False)  # heads apart from size: 128 more than the reference
register_variant("geglu", {"mlp": "geglu"}, 102_528, matrix=False)  # the gate kept, GELU for SiLU
register_variant("silu_mlp", {"mlp": "silu"}, 102_528, matrix=False)  # SiLU without the gate
TEXT_CONTROLS = ("mha_matched", "geglu", "silu_mlp")


def variant_config(name: str, size: str = "S", **overrides) -> Config:
    """The reference (at `size`) with one variant's field replaced, plus optional overrides."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {sorted(VARIANTS)}")
    base = size_config(size)
    return base.replace(**variant_changes(VARIANTS[name], base), **overrides)
