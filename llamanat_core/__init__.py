"""LLaMA Anatomy: the LLaMA decoder block at ~100k parameters, one mechanism at a time."""
from .config import EXPECTED_PARAMETERS, MATRIX_VARIANTS, REFERENCE, VARIANTS, Config, variant_config
from .model import TinyLlama

__all__ = ["Config", "VARIANTS", "MATRIX_VARIANTS", "EXPECTED_PARAMETERS", "REFERENCE",
           "TinyLlama", "variant_config"]
