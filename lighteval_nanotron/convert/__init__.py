"""Convert Llama, Starcoder2 and Qwen2 checkpoints (Hugging Face folders; Llama GGUF files) into Nanotron
checkpoints. See docs/convert.md."""

from lighteval_nanotron.convert.converters import (
    ConversionSummary,
    convert_gguf_to_nanotron,
    convert_hf_to_nanotron,
    nanotron_to_hf,
)
from lighteval_nanotron.convert.nanotron_files import read_nanotron_weights

__all__ = [
    "ConversionSummary",
    "convert_gguf_to_nanotron",
    "convert_hf_to_nanotron",
    "nanotron_to_hf",
    "read_nanotron_weights",
]
