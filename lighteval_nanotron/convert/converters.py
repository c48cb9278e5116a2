"""Hugging Face (Llama, Starcoder2, Qwen2 / Qwen2-MoE) / GGUF (Llama) checkpoints -> Nanotron
checkpoint folders (Qwen2: current Nanotron's), and Llama back to HF weights. Each family's mapping
is one module (`llama_mapping`, `starcoder2_mapping`, `qwen2_mapping`); every converted folder is
checked by the same checkpoint-format reader."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lighteval_nanotron.convert import qwen2_mapping, starcoder2_mapping
from lighteval_nanotron.convert.gguf_source import GGUFWeights, hf_config_from_gguf, open_gguf
from lighteval_nanotron.convert.gguf_tokenizer import tokenizer_from_gguf
from lighteval_nanotron.convert.hf_source import SafetensorsWeights, read_hf_config, tokenizer_files
from lighteval_nanotron.convert.llama_mapping import (
    LlamaShape,
    hf_config_from_nanotron,
    iter_hf_to_nanotron,
    nanotron_config_from_hf,
    nanotron_to_hf_state_dict,
)
from lighteval_nanotron.convert.nanotron_files import read_nanotron_weights
from lighteval_nanotron.convert.nanotron_writer import write_nanotron_checkpoint
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.checkpoint.format import ROPE_THETA_KEY, CheckpointModel, read_checkpoint_model
from lighteval_nanotron.models.families import refuse_untrainable_config

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


_OWN_MAPPINGS = (
    (starcoder2_mapping.is_hf_starcoder2, starcoder2_mapping),
    (qwen2_mapping.is_hf_qwen2, qwen2_mapping),
)
"""Families whose config fields carry everything (no carried RoPE base): (recogniser, mapping module)."""


def _own_mapping(hf_config: Mapping[str, Any]) -> Any:
    return next((mapping for recognises, mapping in _OWN_MAPPINGS if recognises(hf_config)), None)


@dataclass(frozen=True)
class _Target:
    """What a Hugging Face config converts to: the checkpoint model, its config fields, RoPE base."""

    checkpoint_model: CheckpointModel
    model_config: dict[str, Any]
    rope_theta: float
    mapping: Any  # the family's mapping module (None: Llama)


def _target(hf_config: Mapping[str, Any]) -> _Target:
    """The conversion target of a Hugging Face config (Llama, Starcoder2, Qwen2), checked by the
    checkpoint-format reader; CheckpointError / UnsupportedModelError before any weight is read."""
    mapping = _own_mapping(hf_config)
    if mapping is not None:
        model_config, rope_theta = mapping.nanotron_config_from_hf(hf_config)
        fields = model_config
    else:
        model_config, rope_theta = nanotron_config_from_hf(hf_config)  # refuses anything else, naming what is supported
        fields = {**model_config, ROPE_THETA_KEY: rope_theta}
    checkpoint_model = CheckpointModel.from_fields(fields, "The converted config")
    _check_recorded_rotary(checkpoint_model)
    return _Target(checkpoint_model, model_config, rope_theta, mapping)


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
    if target.mapping is not None:
        weights = target.mapping.iter_hf_to_nanotron(hf_weights, target.model_config)
    else:
        _, interleaved = target.checkpoint_model.rotary_layout  # a Llama always records one
        weights = iter_hf_to_nanotron(hf_weights, LlamaShape.from_nanotron_config(target.model_config), interleaved)
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
