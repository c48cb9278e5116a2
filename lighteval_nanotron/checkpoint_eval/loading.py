"""Read what a checkpoint evaluation needs before any weight moves: model config, dtype, tokenizer;
then build the sharded model once and load each checkpoint's weights into it.

Checkpoints written by the trainer and by `lighteval-nanotron convert` both load here; a
converted model may carry a `rope_theta` next to Nanotron 0.4's `LlamaConfig` fields, which is
applied to the built model (see `lighteval_nanotron.convert.nanotron_files`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lighteval_nanotron.checkpoint_eval.discovery import read_training_config
from lighteval_nanotron.errors import CheckpointError, ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_SHARD_FILE = re.compile(r"model_(?P<param>.+?)(?:_pp-rank-\d+-of-\d+_tp-rank-\d+-of-\d+)?\.safetensors")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class ModelSpec:
    """The architecture of a checkpoint: what is built once and shared by every checkpoint of a run."""

    fields: dict[str, Any]
    """Nanotron 0.4 `LlamaConfig` fields."""
    rope_theta: float

    def llama_config(self) -> Any:
        from lighteval_nanotron.convert.nanotron_files import llama_config

        return llama_config(self.fields)


def read_model_spec(path: str | Path) -> ModelSpec:
    """The model config of a checkpoint (model_config.json, else config.yaml), validated."""
    from lighteval_nanotron.convert.nanotron_files import read_model_config

    try:
        fields, rope_theta = read_model_config(Path(path))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"Cannot read the model config of checkpoint {path}: {type(error).__name__}: {error}. "
            "Fix or re-write its model_config.json (or the model.model_config section of config.yaml)."
        ) from error
    spec = ModelSpec(fields, rope_theta)
    spec.llama_config()  # unknown or missing fields fail here, naming the checkpoint's config
    return spec


def check_same_model(reference: ModelSpec, spec: ModelSpec, path: Path) -> None:
    """Every checkpoint of one run must have the architecture of the first (the model is built once)."""
    if spec != reference:
        changed = sorted(
            k for k in set(reference.fields) | set(spec.fields) if reference.fields.get(k) != spec.fields.get(k)
        )
        if spec.rope_theta != reference.rope_theta:
            changed.append("rope_theta")
        raise CheckpointError(
            f"Checkpoint {path} has a different model config from the first checkpoint ({', '.join(changed)}): "
            "evaluate checkpoints of one architecture per run."
        )


def resolve_dtype(name: str | None, path: str | Path) -> torch.dtype:
    """`--dtype` when given, else config.yaml's `model.dtype`, else float32."""
    if name is not None:
        if name not in DTYPES:
            raise ConfigError(f"Unknown dtype {name!r}: choose one of {', '.join(DTYPES)}.")
        return DTYPES[name]
    recorded = (read_training_config(Path(path)).get("model") or {}).get("dtype")
    if recorded is None:
        return torch.float32
    dtype = DTYPES.get(str(recorded).removeprefix("torch."))
    if dtype is None:
        raise CheckpointError(
            f"{path}/config.yaml has model.dtype {recorded!r}: pass --dtype float32|bfloat16|float16."
        )
    return dtype


def _has_tokenizer_files(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in TOKENIZER_FILES)


def tokenizer_source(explicit: str | None, checkpoint: Path) -> str:
    """Where the tokenizer comes from: `explicit`, else the checkpoint folder when it holds
    tokenizer files, else config.yaml's `tokenizer.tokenizer_name_or_path`."""
    if explicit:
        return explicit
    if _has_tokenizer_files(checkpoint):
        return str(checkpoint)
    configured = (read_training_config(checkpoint).get("tokenizer") or {}).get("tokenizer_name_or_path")
    if configured:
        return str(configured)
    raise ConfigError(
        f"No tokenizer for checkpoint {checkpoint}: it holds no tokenizer files and its config.yaml names none "
        "(tokenizer.tokenizer_name_or_path). Pass --tokenizer PATH_OR_NAME."
    )


def load_tokenizer(source: str) -> Any:
    """A `transformers` tokenizer from a folder (or a Hub name already in the local cache)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"Cannot load the tokenizer {source!r} ({type(error).__name__}: {error}). Pass --tokenizer with a "
            "folder that holds tokenizer.json / tokenizer_config.json (offline, Hub names only work when cached)."
        ) from error


def build_model(spec: ModelSpec, parallel_context: Any, dtype: torch.dtype) -> Any:
    """The sharded, uninitialised `LlamaForTraining` for this layout (LayoutError when it does not fit)."""
    from lighteval_nanotron.convert.nanotron_files import apply_rope_theta
    from lighteval_nanotron.models.nanotron_builder import build_nanotron_llama

    model = build_nanotron_llama(spec.llama_config(), parallel_context, dtype)
    apply_rope_theta(model, spec.rope_theta)
    return model


def check_layout_fits(spec: ModelSpec, tp: int, pp: int) -> None:
    """Raise LayoutError before anything is built when the model cannot be split tp x pp ways."""
    from lighteval_nanotron.models.nanotron_builder import check_model_layout

    check_model_layout(spec.llama_config(), tp, pp)


def _saved_shape(file: Path) -> tuple[int, ...]:
    """The full shape of a saved weight: `unsharded_shape` of a shard, else the tensor's own."""
    from nanotron.serialize.metadata import TensorMetadata
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        metadata = handle.metadata()
        if metadata and "unsharded_shape" in metadata:
            return tuple(TensorMetadata.from_str_dict(metadata).unsharded_shape)
        return tuple(handle.get_slice("data").get_shape())


def check_weight_shapes(model: Any, path: Path) -> None:
    """Raise CheckpointError when a saved weight's full shape differs from the model's.

    Nanotron's loader reshards by slicing the saved tensor, so a checkpoint whose weights are
    larger than its config says would otherwise load silently, and wrongly, at another layout.
    """
    expected = {}
    for name, param in model.named_parameters():
        sharded = getattr(param, "is_sharded", False)
        expected[name] = tuple(param.get_sharded_info().unsharded_shape) if sharded else tuple(param.shape)
    root = Path(path) / "model"
    for file in root.rglob("*.safetensors"):
        match = _SHARD_FILE.fullmatch(file.name)
        name = ".".join(file.relative_to(root).parent.parts + (match["param"],)) if match else None
        if name in expected and _saved_shape(file) != expected[name]:
            raise CheckpointError(
                f"Checkpoint {path}: {name} is saved with shape {_saved_shape(file)} but its model config "
                f"gives {expected[name]}. The model config does not describe these weights: fix model_config.json."
            )


def load_weights_into(model: Any, parallel_context: Any, path: Path) -> None:
    """Copy a checkpoint's weights into the built model, resharding them to its layout."""
    from nanotron.serialize.weights import load_weights

    check_weight_shapes(model, path)
    try:
        load_weights(model=model, parallel_context=parallel_context, root_folder=Path(path))
    except (OSError, ValueError, KeyError, RuntimeError, AssertionError) as error:
        raise CheckpointError(
            f"Loading the weights of checkpoint {path} failed: {type(error).__name__}: {error}. "
            "Check that the folder is complete and that its model config matches the saved weights."
        ) from error
