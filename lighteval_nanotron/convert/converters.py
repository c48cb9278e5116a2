"""Hugging Face (Llama, Starcoder2, Qwen2 / Qwen2-MoE) / GGUF (Llama) checkpoints -> Nanotron
checkpoint folders (Qwen2: current Nanotron's), and Llama back to HF weights. The model family whose
conversion takes the `config.json` (`models.families.family_of_hf_config`) maps it (each family's
`conversion.py`); every converted folder is checked by the same checkpoint-format reader."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.convert.gguf_source import GGUFWeights, hf_config_from_gguf, open_gguf
from lighteval_nanotron.convert.gguf_tokenizer import tokenizer_from_gguf
from lighteval_nanotron.convert.hf_source import SafetensorsWeights, read_hf_config, tokenizer_files
from lighteval_nanotron.convert.nanotron_files import read_nanotron_weights
from lighteval_nanotron.convert.nanotron_writer import write_nanotron_checkpoint
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families import family_of_hf_config, refuse_untrainable_config
from lighteval_nanotron.models.families.hf_conversion import HfConversion, check_hf_config
from lighteval_nanotron.models.families.llama.conversion import (
    LlamaShape,
    hf_config_from_nanotron,
    nanotron_to_hf_state_dict,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ConversionSummary:
    """What a conversion wrote."""

    folder: Path
    num_parameters: int
    dtype: torch.dtype
    rope_theta: float
    tokenizer_saved: bool


def parse_dtype(name: str) -> torch.dtype:
    """`float32` / `bfloat16` / `float16` -> torch dtype."""
    try:
        return DTYPES[name]
    except KeyError:
        raise CheckpointError(f"Unknown dtype {name!r}; choose one of {sorted(DTYPES)}.") from None


def _prepare_destination(dst: Path) -> Path:
    dst = Path(dst)
    if dst.exists() and any(dst.iterdir()):
        raise CheckpointError(f"Destination {dst} is not empty; choose a new folder (shards must not mix).")
    dst.mkdir(parents=True, exist_ok=True)
    return dst


def _source_dtype(hf_config: dict[str, Any], weights: Mapping[str, torch.Tensor]) -> torch.dtype:
    name = hf_config.get("dtype") or hf_config.get("torch_dtype")
    if name in DTYPES:
        return DTYPES[name]
    first = weights[next(iter(weights))].dtype
    return first if first in DTYPES.values() else torch.float32


@dataclass(frozen=True)
class _Target:
    """What a Hugging Face config converts to: the checkpoint model, its config fields, RoPE base."""

    checkpoint_model: CheckpointModel
    model_config: dict[str, Any]
    rope_theta: float
    conversion: type[HfConversion]


def _target(hf_config: Mapping[str, Any]) -> _Target:
    """The conversion target of a Hugging Face config (Llama, Starcoder2, Qwen2), checked by the
    checkpoint-format reader; CheckpointError / UnsupportedModelError before any weight is read."""
    check_hf_config(hf_config, "The model's config.json")
    conversion = family_of_hf_config(hf_config).hf_conversion()  # refuses anything else, naming what converts
    model_config, rope_theta = conversion.nanotron_config(hf_config)
    fields = conversion.recorded_fields(model_config, rope_theta)
    checkpoint_model = CheckpointModel.from_fields(fields, "The converted config")
    _check_recorded_rotary(checkpoint_model)
    return _Target(checkpoint_model, model_config, rope_theta, conversion)


def _check_recorded_rotary(checkpoint_model: CheckpointModel) -> None:
    """The q/k rows are written for `checkpoint_model.rotary_layout`: the config written beside them
    must read back, under the installed Nanotron, to that same layout, or every score of the
    checkpoint would be wrong. CheckpointError before any weight is written otherwise."""
    written = CheckpointModel.from_fields(checkpoint_model.config_fields(), "The converted config").rotary_layout
    if written != checkpoint_model.rotary_layout:
        raise CheckpointError(
            f"The converted config would read back with RoPE (base, interleaved) = {written}, but the weights "
            f"are laid out for {checkpoint_model.rotary_layout}: not converting (a bug: please report it)."
        )


def _write(dst: Path, target: _Target, hf_weights: Mapping[str, torch.Tensor], dtype: torch.dtype) -> int:
    weights = target.conversion.weights(hf_weights, target.model_config, target.checkpoint_model.rotary_layout)
    return write_nanotron_checkpoint(dst, target.checkpoint_model, weights, dtype)


def convert_hf_to_nanotron(src: Path, dst: Path, dtype: str | None = None) -> ConversionSummary:
    """Convert a Hugging Face Llama, Starcoder2 or Qwen2 (-MoE) folder (config.json + safetensors)
    into a Nanotron checkpoint at `dst` (Qwen2 needs current Nanotron installed).

    `dtype` defaults to the source's dtype. Tokenizer files found in `src` are copied to `dst`.
    """
    src = Path(src)
    hf_config = read_hf_config(src)
    target = _target(hf_config)  # unsupported models are refused before any weight is read
    refuse_untrainable_config(target.checkpoint_model.model_config)  # config.yaml is a training Config
    hf_weights = SafetensorsWeights(src)
    weight_dtype = parse_dtype(dtype) if dtype else _source_dtype(hf_config, hf_weights)
    dst = _prepare_destination(dst)
    num_parameters = _write(dst, target, hf_weights, weight_dtype)
    files = tokenizer_files(src)
    for path in files:
        shutil.copy2(path, dst / path.name)
    return ConversionSummary(dst, num_parameters, weight_dtype, target.rope_theta, tokenizer_saved=bool(files))


def convert_gguf_to_nanotron(
    src: Path, dst: Path, dtype: str = "float32", tokenizer: Path | None = None
) -> ConversionSummary:
    """Convert a GGUF Llama file into a Nanotron checkpoint at `dst` (weights dequantized to `dtype`).

    The tokenizer is rebuilt from the GGUF metadata, or copied from the Hugging Face folder `tokenizer`.
    """
    weight_dtype = parse_dtype(dtype)
    reader = open_gguf(src)
    hf_config = hf_config_from_gguf(reader)
    target = _target(hf_config)
    hf_weights = GGUFWeights(reader, hf_config, weight_dtype)
    if tokenizer is None:
        hf_tokenizer, files = tokenizer_from_gguf(reader), []
    else:
        hf_tokenizer, files = None, tokenizer_files(Path(tokenizer))
        if not any(path.name == "tokenizer.json" for path in files):
            raise CheckpointError(f"No tokenizer.json in {tokenizer}: pass a Hugging Face tokenizer folder.")
    dst = _prepare_destination(dst)
    num_parameters = _write(dst, target, hf_weights, weight_dtype)
    if hf_tokenizer is not None:
        hf_tokenizer.save_pretrained(dst)
    for path in files:
        shutil.copy2(path, dst / path.name)
    return ConversionSummary(dst, num_parameters, weight_dtype, target.rope_theta, tokenizer_saved=True)


def nanotron_to_hf(folder: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A Nanotron Llama checkpoint (any TP layout) as a Hugging Face config dict and `LlamaForCausalLM` weights."""
    checkpoint_model = read_checkpoint_model(folder)
    if checkpoint_model.family.name != "llama":
        raise CheckpointError(
            f"Checkpoint {folder} is a {checkpoint_model.family.name} model: only Llama checkpoints convert back to "
            "Hugging Face weights."
        )
    model_config = dataclasses.asdict(checkpoint_model.model_config)
    shape = LlamaShape.from_nanotron_config(model_config)
    rope_theta, interleaved = checkpoint_model.rotary_layout  # current Nanotron's may record halves (HF order)
    return hf_config_from_nanotron(model_config, rope_theta), nanotron_to_hf_state_dict(
        read_nanotron_weights(folder), shape, interleaved
    )
