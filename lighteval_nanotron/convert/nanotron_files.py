"""The files of a Nanotron 0.4 checkpoint folder that do not need a model: configs and raw weights.

Layout (what Nanotron's trainer writes, minus optimizer/LR/random states):

    config.yaml                 nanotron.config.Config (model section: LlamaConfig fields)
    model_config.json           the LlamaConfig fields as JSON
    checkpoint_metadata.json    checkpoint version and layout
    model/<module path>/model_<param>[_pp-rank-P-of-N_tp-rank-T-of-M].safetensors

RoPE theta: Nanotron 0.4's Llama has no `rope_theta` field (RotaryEmbedding uses 10000). When a
model needs another value it is written as `rope_theta` in the model config, the field name newer
Nanotron versions use; `read_model_config` returns it and `apply_rope_theta` sets it on a built model.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors import safe_open

from lighteval_nanotron.convert.llama_mapping import DEFAULT_ROPE_THETA
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.parallel.cpu.imports import import_nanotron

ROPE_THETA_KEY = "rope_theta"
_SHARD_FILE = re.compile(r"model_(?P<param>.+?)(?:_pp-rank-\d+-of-\d+_tp-rank-\d+-of-\d+)?\.safetensors")


def llama_config(model_config: dict[str, Any]) -> Any:
    """A `nanotron.config.LlamaConfig` from its fields (a `rope_theta` key is not one of them)."""
    fields = {key: value for key, value in model_config.items() if key != ROPE_THETA_KEY}
    try:
        return import_nanotron().LlamaConfig(**fields)
    except TypeError as err:
        raise CheckpointError(f"Model config is not a Nanotron 0.4 LlamaConfig ({err}).") from err


def _with_rope_theta(fields: dict[str, Any], rope_theta: float) -> dict[str, Any]:
    return fields if rope_theta == DEFAULT_ROPE_THETA else {**fields, ROPE_THETA_KEY: rope_theta}


def write_configs(folder: Path, model_config: dict[str, Any], rope_theta: float, dtype: torch.dtype) -> None:
    """Write `config.yaml` and `model_config.json` as Nanotron 0.4 does (TP1/PP1/DP1, this folder as init)."""
    nanotron_config = import_nanotron()
    folder = Path(folder)
    llama = llama_config(model_config)
    config = nanotron_config.Config(
        general=nanotron_config.GeneralArgs(project="converted", run=folder.name, seed=42),
        parallelism=nanotron_config.ParallelismArgs(dp=1, pp=1, tp=1),
        model=nanotron_config.ModelArgs(
            model_config=llama, init_method=nanotron_config.ExistingCheckpointInit(path=folder), dtype=dtype
        ),
        tokenizer=nanotron_config.TokenizerArgs(tokenizer_name_or_path=str(folder)),
    )
    as_dict = config.as_dict()
    as_dict["model"]["model_config"] = _with_rope_theta(as_dict["model"]["model_config"], rope_theta)
    with open(folder / "config.yaml", "w") as out:
        yaml.dump(as_dict, out)
    model_fields = _with_rope_theta(dataclasses.asdict(llama), rope_theta)
    (folder / "model_config.json").write_text(json.dumps(model_fields))


def read_model_config(folder: Path) -> tuple[dict[str, Any], float]:
    """The LlamaConfig fields and RoPE theta of a checkpoint (from model_config.json, else config.yaml)."""
    folder = Path(folder)
    if (folder / "model_config.json").is_file():
        fields = json.loads((folder / "model_config.json").read_text())
    elif (folder / "config.yaml").is_file():
        fields = yaml.safe_load((folder / "config.yaml").read_text())["model"]["model_config"]
    else:
        raise CheckpointError(f"{folder} has neither model_config.json nor config.yaml: not a Nanotron checkpoint.")
    fields = dict(fields)
    rope_theta = float(fields.pop(ROPE_THETA_KEY, DEFAULT_ROPE_THETA))
    return fields, rope_theta


def apply_rope_theta(model: torch.nn.Module, rope_theta: float) -> None:
    """Give every attention layer of a built Nanotron 0.4 Llama this RoPE base (no-op for 10000).

    Nanotron 0.4 builds its two rotary modules with the default base: `flash_rotary_embedding`
    (used by the full-sequence forward) is rebuilt, `rotary_embedding` (the KV-cache path) gets
    its `theta` and recomputes its table on first use.
    """
    if rope_theta == DEFAULT_ROPE_THETA:
        return
    for module in model.modules():
        flash_rotary = getattr(module, "flash_rotary_embedding", None)
        if flash_rotary is None:
            continue
        module.flash_rotary_embedding = type(flash_rotary)(
            dim=flash_rotary.dim, base=rope_theta, interleaved=flash_rotary.interleaved
        )
        module.rotary_embedding.theta = rope_theta
        module.rotary_embedding._initialized_buffer = False


def read_nanotron_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every weight of a Nanotron checkpoint as a full tensor, whatever TP layout wrote it.

    Names are those of `LlamaForTraining.state_dict()`; a tied weight appears once, under the
    name it was saved with.
    """
    import_nanotron()
    from nanotron.serialize.metadata import TensorMetadata

    root = Path(folder) / "model"
    if not root.is_dir():
        raise CheckpointError(f"{root} not found: not a Nanotron checkpoint folder (expected a model/ subfolder).")
    shards: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(root.rglob("*.safetensors")):
        match = _SHARD_FILE.fullmatch(path.name)
        if match is not None:
            shards[".".join(path.relative_to(root).parent.parts + (match["param"],))].append(path)
    weights = {}
    for name, paths in shards.items():
        full = None
        for path in paths:
            with safe_open(path, framework="pt") as handle:
                data, metadata = handle.get_tensor("data"), handle.metadata()
            if not metadata:
                full = data
                continue
            meta = TensorMetadata.from_str_dict(metadata)
            full = torch.empty(meta.unsharded_shape, dtype=data.dtype) if full is None else full
            for pair in meta.local_global_slices_pairs:
                full[pair.global_slices] = data[pair.local_slices]
        weights[name] = full
    return weights
