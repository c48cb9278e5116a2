"""The device check's models: random Llamas of a named shape made from a fixed seed, and the
trained tiny model carried in `.gpu-carry/counting-llama` (scripts/gpu_carry.py).

A random model goes through the project's own conversion: transformers' `LlamaForCausalLM`
initialised from the seed (normal weights, unit norms), saved as a Hugging Face folder with the
carried SmolLM2 tokenizer, then `convert_hf_to_nanotron` in fp32. No weights travel.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

SMOLLM2_VOCAB = dict(vocab_size=49152, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
SHAPES: dict[str, dict[str, Any]] = {
    # SmolLM2-135M (HuggingFaceTB/SmolLM2-135M's config)
    "smollm2": dict(
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        **SMOLLM2_VOCAB,
    ),
    # Llama-3.2-1B's body (16 layers of 2048, 32 heads, 8 KV heads, MLP 8192) on SmolLM2's vocabulary: 1.07B
    "llama-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        **SMOLLM2_VOCAB,
    ),
    # the dry run's stand-ins: the same vocabulary and head grouping on a tiny body
    "smollm2-mini": dict(
        hidden_size=96,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=3,
        num_key_value_heads=1,
        **SMOLLM2_VOCAB,
    ),
    "llama-mini": dict(
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        **SMOLLM2_VOCAB,
    ),
}
COMMON = dict(
    hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=100000.0, initializer_range=0.02
)
TOKENIZER_FOLDER = "smollm2-tokenizer"
TRAINED_FOLDER = "counting-llama"


def hf_config(shape: str) -> dict[str, Any]:
    """transformers `LlamaConfig` fields of a named shape."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **COMMON, **SHAPES[shape]}


def parameter_count(shape: str) -> int:
    fields = SHAPES[shape]
    h, inter, layers = fields["hidden_size"], fields["intermediate_size"], fields["num_hidden_layers"]
    kv = h * fields["num_key_value_heads"] // fields["num_attention_heads"]
    return fields["vocab_size"] * h + layers * (2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h) + h


def random_checkpoint(shape: str, seed: int, carry: Path, dst: Path) -> dict[str, Any]:
    """A Nanotron checkpoint (fp32, with the SmolLM2 tokenizer) of a random Llama of `shape`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from lighteval_nanotron.convert import convert_hf_to_nanotron

    if (dst / "checkpoint_metadata.json").is_file():
        return {"shape": shape, "seed": seed, "checkpoint": str(dst), "reused": True}
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**hf_config(shape)))
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        for file in (carry / TOKENIZER_FOLDER).iterdir():
            shutil.copy2(file, Path(tmp) / file.name)
        summary = convert_hf_to_nanotron(Path(tmp), dst, dtype="float32")
    return {"shape": shape, "seed": seed, "checkpoint": str(dst), "parameters": summary.num_parameters}


def trained_checkpoint(carry: Path) -> Path:
    folder = carry / TRAINED_FOLDER
    if not (folder / "checkpoint_metadata.json").is_file():
        raise SystemExit(f"error: {folder} is missing: run `make gpu-carry` (docs/gpu_check.md).")
    return folder


def nanotron_fields(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / "model_config.json").read_text())
