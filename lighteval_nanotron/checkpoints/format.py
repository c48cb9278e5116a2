"""What a Nanotron checkpoint folder (0.4 or current main) holds, read from its files without
building a model.

    config.yaml                 nanotron.config.Config (model section: the model config, model.dtype)
    model_config.json           the model config as JSON
    checkpoint_metadata.json    checkpoint version and layout (written last by Nanotron)
    model/<module path>/model_<param>[_pp-rank-P-of-N_tp-rank-T-of-M].safetensors
                                (main adds `_exp-rank-E-of-K` for expert-parallel shards: refused)

The model config is the fields of one model family's config class (`models.families`: Llama,
Starcoder2, and with current Nanotron Qwen2, whose `moe_config` is a nested mapping) plus, for a
config class without them, the family's carried fields: 0.4's Llama has no `rope_theta` (its rotary
embeddings use 10000) nor `rope_interleaved` (it always rotates interleaved pairs); current Nanotron
records both, and `lighteval-nanotron convert` writes `rope_theta` for models with another RoPE base
(SmolLM2: 100000). Current Nanotron's other new Llama keys are inert for evaluation
(`_attn_implementation`, `z_loss_*`) or must be off (`attention_bias`). `read_checkpoint_model`
reads all of it into one `CheckpointModel`; `build_nanotron_model(..., carried=...)` applies the
carried fields to the built model.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from lighteval_nanotron.checkpoints.path_hints import checkpoint_path_hint
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families import ModelFamily, family_of_config, family_of_fields
from lighteval_nanotron.models.families.base import DEFAULT_ROPE_THETA, ROPE_THETA_KEY
from lighteval_nanotron.nanotron_compat.imports import import_nanotron
from lighteval_nanotron.options.base import matches_type
from lighteval_nanotron.yaml_keys import UniqueKeyLoader

MODEL_CONFIG_FILE = "model_config.json"
TRAINING_CONFIG_FILE = "config.yaml"
METADATA_FILE = "checkpoint_metadata.json"
WEIGHTS_FOLDER = "model"
ROPE_INTERLEAVED_KEY = "rope_interleaved"
CONVERTED_STAGE = "converted"
"""The one data stage in the `checkpoint_metadata.json` of weights not produced by training (current
Nanotron's metadata needs a step and stages: they are written as step 0 of this stage)."""

_WEIGHT_FILE = re.compile(
    r"model_(?P<param>.+?)(?:_pp-rank-\d+-of-\d+_tp-rank-\d+-of-\d+(?P<expert>_exp-rank-\d+-of-\d+)?)?\.safetensors"
)


@dataclass(frozen=True)
class CheckpointModel:
    """The architecture a checkpoint describes: the model config and its RoPE settings, recorded
    beside a config class that lacks them (0.4's `LlamaConfig`: `rope_theta`, `rope_interleaved`),
    read from the config where its class has them (current Nanotron)."""

    model_config: Any
    rope_theta: float = DEFAULT_ROPE_THETA
    rope_interleaved: bool = True

    @property
    def family(self) -> type[ModelFamily]:
        return family_of_config(self.model_config)

    @property
    def carried(self) -> dict[str, Any]:
        """The carried fields the config class lacks, with values other than the defaults, for
        `ModelFamily.apply_carried` (a field of the config class is recorded and applied by it)."""
        values = {ROPE_THETA_KEY: self.rope_theta, ROPE_INTERLEAVED_KEY: self.rope_interleaved}
        defaults = {ROPE_THETA_KEY: DEFAULT_ROPE_THETA, ROPE_INTERLEAVED_KEY: True}
        return {
            key: value
            for key, value in values.items()
            if value != defaults[key] and not hasattr(self.model_config, key)
        }

    @classmethod
    def from_fields(cls, fields: Any, where: str = "the model config") -> CheckpointModel:
        """From recorded fields (a model config's, plus carried and inert keys of newer Nanotron
        configs); UnsupportedModelError for a config no family supports or an option the engine
        cannot run, CheckpointError naming `where` for keys nothing knows."""
        if not isinstance(fields, Mapping):
            raise CheckpointError(f"{where} is not a mapping: {fields!r}.")
        family = family_of_fields(fields, where)
        # A carried field the recorded config lacks means the family's default (what 0.4, which has no
        # such key, does), also where the installed config class has the key with another default:
        # current Nanotron's LlamaConfig defaults rope_interleaved to false, 0.4's Llama rotates interleaved.
        recorded = {**family.carried_fields, **fields}
        config_fields, carried = family.split_recorded_fields(recorded, where)
        # Where the installed config class has the field (current Nanotron), the config's value is the
        # one the model uses, and it is checked as a carried one is.
        in_use = {**config_fields, **carried}
        rope_theta = in_use.get(ROPE_THETA_KEY, DEFAULT_ROPE_THETA)
        if not matches_type(rope_theta, float, whole_floats=True):  # "10000" or true would be read as a base
            raise CheckpointError(f"{where} has {ROPE_THETA_KEY}={rope_theta!r}, not a number: fix or remove it.")
        rope_theta = float(rope_theta)
        rope_interleaved = in_use.get(ROPE_INTERLEAVED_KEY, True)
        if not isinstance(rope_interleaved, bool):
            raise CheckpointError(f"{where} has {ROPE_INTERLEAVED_KEY}={rope_interleaved!r}, not true or false.")
        model_config = family.config_from_fields(config_fields, where)
        family.check_config(model_config)
        return cls(model_config, rope_theta, rope_interleaved)

    @property
    def rotary_layout(self) -> tuple[float, bool] | None:
        """(RoPE base, interleaved pairs) that the weights' q/k rows are laid out for: the model
        config's fields where its class has them (current Nanotron's Llama, Qwen2), else the carried
        ones (0.4's Llama). None for a family that records no pair layout (Starcoder2: always halves)."""
        config = self.model_config
        if not hasattr(config, ROPE_INTERLEAVED_KEY) and ROPE_INTERLEAVED_KEY not in self.family.carried_fields:
            return None
        theta = getattr(config, ROPE_THETA_KEY, self.rope_theta)
        return float(theta), bool(getattr(config, ROPE_INTERLEAVED_KEY, self.rope_interleaved))

    def config_fields(self) -> dict[str, Any]:
        """The fields to record: the config's, plus the carried ones that are not the defaults."""
        return {**dataclasses.asdict(self.model_config), **self.carried}


def is_complete_checkpoint(path: str | Path) -> bool:
    """A folder with weights and the metadata file Nanotron writes last."""
    return (Path(path) / WEIGHTS_FOLDER).is_dir() and (Path(path) / METADATA_FILE).is_file()


def check_complete_checkpoint(path: str | Path) -> None:
    """Raise CheckpointError naming what is missing when `path` is not a complete checkpoint folder."""
    path = Path(path)
    hint = checkpoint_path_hint(path)
    if not path.is_dir():
        raise CheckpointError(hint or f"Checkpoint folder {path} does not exist: check the path.")
    for required in (WEIGHTS_FOLDER, METADATA_FILE):
        if not (path / required).exists():
            if hint:
                raise CheckpointError(hint)
            raise CheckpointError(
                f"Checkpoint {path} has no {required}: it is not a complete Nanotron checkpoint. Point at a folder "
                "written by Nanotron (e.g. checkpoints/<step>) or by `lighteval-nanotron convert`."
            )


def read_training_config(path: str | Path) -> dict[str, Any]:
    """The checkpoint's `config.yaml` as a dict ({} when there is none)."""
    file = Path(path) / TRAINING_CONFIG_FILE
    if not file.is_file():
        return {}
    try:
        values = yaml.load(file.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except (OSError, yaml.YAMLError) as error:
        raise CheckpointError(f"Cannot read {file}: {error}. Fix or re-write it.") from error
    return values if isinstance(values, dict) else {}


def training_config_section(path: str | Path, key: str) -> dict[str, Any]:
    """One section of the checkpoint's `config.yaml` ({} when absent); CheckpointError naming it
    when it is there but not a mapping (a damaged or hand-edited file)."""
    section = read_training_config(path).get(key)
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise CheckpointError(
            f"{Path(path) / TRAINING_CONFIG_FILE}: its {key!r} section is {section!r}, not a mapping: fix it."
        )
    return section


def _recorded_model_config(root: Path) -> Any:
    try:
        if (root / MODEL_CONFIG_FILE).is_file():
            return json.loads((root / MODEL_CONFIG_FILE).read_text(encoding="utf-8-sig"))
        if (root / TRAINING_CONFIG_FILE).is_file():
            return read_training_config(root)["model"]["model_config"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"Cannot read the model config of checkpoint {root}: {type(error).__name__}: {error}. Fix or re-write "
            f"{MODEL_CONFIG_FILE} (or the model.model_config section of {TRAINING_CONFIG_FILE})."
        ) from error
    raise CheckpointError(
        f"Checkpoint {root} has neither {MODEL_CONFIG_FILE} nor {TRAINING_CONFIG_FILE}: "
        "point at a checkpoint folder written by Nanotron (e.g. checkpoints/<step>)."
    )


def read_checkpoint_model(path: str | Path) -> CheckpointModel:
    """The model a checkpoint folder describes (model_config.json, else config.yaml's model.model_config)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"Checkpoint folder {root} does not exist: check the path.")
    model = CheckpointModel.from_fields(_recorded_model_config(root), f"The model config of checkpoint {root}")
    init_method = training_config_section(root, "model").get("init_method")
    if isinstance(init_method, dict) and init_method.get("use_mup"):
        model.model_config._is_using_mup = True  # as current Nanotron's ModelArgs marks a SpectralMupInit run
        model.family.check_config(model.model_config)
    return model


def read_checkpoint_dtype(path: str | Path) -> torch.dtype | None:
    """The floating-point `model.dtype` recorded in a checkpoint's config.yaml, or None when there is none."""
    model_section = read_training_config(path).get("model")
    name = model_section.get("dtype") if isinstance(model_section, dict) else None
    if name is None:
        return None
    dtype = getattr(torch, str(name).removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise CheckpointError(
            f"{Path(path) / TRAINING_CONFIG_FILE} has model.dtype {name!r}, not a floating-point torch dtype: "
            "fix it (e.g. bfloat16) or give the dtype explicitly."
        )
    return dtype


def weight_files(path: str | Path) -> dict[str, list[Path]]:
    """The safetensors files of each saved weight (one per shard), by the training model's parameter name."""
    root = Path(path) / WEIGHTS_FOLDER
    if not root.is_dir():
        raise CheckpointError(f"{root} not found: not a Nanotron checkpoint folder (expected a model/ subfolder).")
    files: dict[str, list[Path]] = defaultdict(list)
    for file in sorted(root.rglob("*.safetensors")):
        match = _WEIGHT_FILE.fullmatch(file.name)
        if match is not None and match["expert"]:
            raise CheckpointError(
                f"{file} is an expert-parallel shard: the checkpoint was saved with expert_parallel_size > 1, "
                "which lighteval_nanotron does not load. Save (or reshard) it with expert_parallel_size: 1."
            )
        if match is not None:
            files[".".join(file.relative_to(root).parent.parts + (match["param"],))].append(file)
    return dict(files)


def _saved_shape(file: Path) -> tuple[int, ...]:
    """The full shape of a saved weight: `unsharded_shape` of a shard, else the tensor's own."""
    import_nanotron()
    from nanotron.serialize.metadata import TensorMetadata
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        metadata = handle.metadata()
        if metadata and "unsharded_shape" in metadata:
            return tuple(TensorMetadata.from_str_dict(metadata).unsharded_shape)
        return tuple(handle.get_slice("data").get_shape())


def saved_weight_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """The full (unsharded) shape of every saved weight, by parameter name, read from file headers only."""
    return {name: _saved_shape(files[0]) for name, files in weight_files(path).items()}
