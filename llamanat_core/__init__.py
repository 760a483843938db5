"""LLaMA Anatomy: the LLaMA decoder block at ~100k parameters, one mechanism at a time."""
from .model.config import EXPECTED_PARAMETERS, MATRIX_VARIANTS, REFERENCE, VARIANTS, Config, variant_config

__all__ = ["Config", "VARIANTS", "MATRIX_VARIANTS", "EXPECTED_PARAMETERS", "REFERENCE",
           "TinyLlama", "variant_config"]


def __getattr__(name: str):
    """`llamanat_core.TinyLlama` (and `from llamanat_core import TinyLlama`), loaded when
    first asked for: importing any module of the package then costs no torch until one
    needs it, so `llamanat --help` answers at once."""
    if name == "TinyLlama":
        from .model.model import TinyLlama  # lazy: torch loads only when the model is asked for

        return TinyLlama
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
