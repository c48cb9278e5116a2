"""Build a Nanotron 0.4 `LlamaForTraining` on a `ParallelContext`, save it, load a checkpoint.

A checkpoint folder, as Nanotron's trainer writes it, holds `model/` (safetensors, one file per
shard), `checkpoint_metadata.json`, `model_config.json` and usually `config.yaml`. Nanotron's
`load_weights` reshards on load, so a checkpoint saved at one TP/PP/DP layout loads at any other
that fits the model. On CPU call `enable_cpu_support()` first.

    model, model_config = load_nanotron_checkpoint("ckpt/10", parallel_context)
"""

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

import torch
import torch.distributed as dist
import yaml

from lighteval_nanotron.errors import CheckpointError, LayoutError
from lighteval_nanotron.parallel.cpu import import_nanotron, is_cpu_support_enabled

if TYPE_CHECKING:
    from nanotron.config import LlamaConfig, ParallelismArgs
    from nanotron.models.llama import LlamaForTraining
    from nanotron.parallel import ParallelContext

MODEL_CONFIG_FILE = "model_config.json"
TRAINING_CONFIG_FILE = "config.yaml"
METADATA_FILE = "checkpoint_metadata.json"
WEIGHTS_FOLDER = "model"


def check_model_layout(model_config: "LlamaConfig", tp: int, pp: int) -> None:
    """Raise LayoutError, naming the fix, when the model cannot be split tp ways and into pp stages."""
    divisible = {
        "num_attention_heads": model_config.num_attention_heads,
        "num_key_value_heads": model_config.num_key_value_heads,
        "vocab_size": model_config.vocab_size,
        "intermediate_size": model_config.intermediate_size,
    }
    for name, value in divisible.items():
        if value % tp:
            raise LayoutError(f"TP={tp} does not divide the model's {name}={value}: choose a TP size that divides it.")
    if model_config.hidden_size % model_config.num_attention_heads:
        raise LayoutError(
            f"hidden_size={model_config.hidden_size} is not a multiple of "
            f"num_attention_heads={model_config.num_attention_heads}: the model config is invalid."
        )
    if pp > model_config.num_hidden_layers:
        raise LayoutError(
            f"PP={pp} is larger than the model's num_hidden_layers={model_config.num_hidden_layers}: "
            "use at most one pipeline stage per layer."
        )


def _default_device() -> torch.device:
    if is_cpu_support_enabled() or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def build_nanotron_llama(
    model_config: "LlamaConfig",
    parallel_context: "ParallelContext",
    dtype: torch.dtype = torch.float32,
    device: Optional[torch.device] = None,
    parallel_config: Optional["ParallelismArgs"] = None,
) -> "LlamaForTraining":
    """Build an (uninitialised) LlamaForTraining sharded over `parallel_context`, ties marked.

    `parallel_config` defaults to the context's sizes with TP all-reduce and no async TP
    communication. `device` defaults to the CPU when CPU support is on or there is no CUDA.
    Raises LayoutError when the layout does not fit the model.
    """
    tp, pp, dp = (parallel_context.tp_pg.size(), parallel_context.pp_pg.size(), parallel_context.dp_pg.size())
    check_model_layout(model_config, tp, pp)
    import_nanotron()
    from nanotron.config import ParallelismArgs
    from nanotron.models import build_model
    from nanotron.models.llama import LlamaForTraining
    from nanotron.trainer import mark_tied_parameters

    if parallel_config is None:
        parallel_config = ParallelismArgs(dp=dp, pp=pp, tp=tp)
    model = build_model(
        model_builder=lambda: LlamaForTraining(
            config=model_config, parallel_context=parallel_context, parallel_config=parallel_config
        ),
        parallel_context=parallel_context,
        dtype=dtype,
        device=device if device is not None else _default_device(),
    )
    mark_tied_parameters(model=model, parallel_context=parallel_context, parallel_config=parallel_config)
    return model


def save_nanotron_checkpoint(
    model: "LlamaForTraining",
    model_config: "LlamaConfig",
    parallel_context: "ParallelContext",
    path: Union[str, Path],
    training_config: Optional[Any] = None,
) -> Path:
    """Save the model's weights as a Nanotron checkpoint; every rank must call it.

    Writes `model/`, `checkpoint_metadata.json`, `model_config.json` and, when a Nanotron
    `Config` is given, `config.yaml`. Returns the folder.
    """
    import_nanotron()
    from nanotron.serialize.metadata import save_meta
    from nanotron.serialize.weights import save_weights

    root = Path(path)
    if dist.get_rank(parallel_context.world_pg) == 0:
        root.mkdir(parents=True, exist_ok=True)
    dist.barrier(parallel_context.world_pg)
    save_weights(model=model, parallel_context=parallel_context, root_folder=root)
    save_meta(parallel_context=parallel_context, root_folder=root, checkpoint_metadata={})
    if dist.get_rank(parallel_context.world_pg) == 0:
        (root / MODEL_CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(model_config), indent=2))
        if training_config is not None:
            training_config.save_as_yaml(root / TRAINING_CONFIG_FILE)
    dist.barrier(parallel_context.world_pg)
    return root


def _read_model_config_dict(root: Path) -> Dict[str, Any]:
    model_config_file, training_config_file = root / MODEL_CONFIG_FILE, root / TRAINING_CONFIG_FILE
    try:
        if model_config_file.is_file():
            return json.loads(model_config_file.read_text())
        if training_config_file.is_file():
            return yaml.safe_load(training_config_file.read_text())["model"]["model_config"]
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"Cannot read the model config of checkpoint {root}: {error}. Fix or re-write "
            f"{MODEL_CONFIG_FILE} (or the model.model_config section of {TRAINING_CONFIG_FILE})."
        ) from error
    raise CheckpointError(
        f"Checkpoint {root} has neither {MODEL_CONFIG_FILE} nor {TRAINING_CONFIG_FILE}: "
        "point at a checkpoint folder written by Nanotron (e.g. checkpoints/<step>)."
    )


def read_model_config(path: Union[str, Path]) -> "LlamaConfig":
    """The LlamaConfig of a checkpoint folder (from model_config.json, else config.yaml)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"Checkpoint folder {root} does not exist: check the path.")
    values = _read_model_config_dict(root)
    import_nanotron()
    from nanotron.config import LlamaConfig

    if not isinstance(values, dict):
        raise CheckpointError(f"The model config of checkpoint {root} is not a mapping: {values!r}.")
    known = {field.name for field in dataclasses.fields(LlamaConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise CheckpointError(
            f"The model config of checkpoint {root} has keys that Nanotron 0.4's LlamaConfig does not know: "
            f"{', '.join(unknown)}. Only Llama checkpoints in Nanotron 0.4's format are supported."
        )
    return LlamaConfig(**values)


def read_checkpoint_dtype(path: Union[str, Path]) -> Optional[torch.dtype]:
    """The `model.dtype` recorded in a checkpoint's config.yaml, or None when there is none."""
    training_config_file = Path(path) / TRAINING_CONFIG_FILE
    if not training_config_file.is_file():
        return None
    try:
        name = (yaml.safe_load(training_config_file.read_text()).get("model") or {}).get("dtype")
    except (OSError, yaml.YAMLError, AttributeError) as error:
        raise CheckpointError(f"Cannot read {training_config_file}: {error}. Fix or re-write it.") from error
    if name is None:
        return None
    dtype = getattr(torch, str(name).replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{training_config_file} has an unknown model.dtype {name!r}.")
    return dtype


def load_nanotron_checkpoint(
    path: Union[str, Path],
    parallel_context: "ParallelContext",
    dtype: Optional[torch.dtype] = None,
    device: Optional[torch.device] = None,
    parallel_config: Optional["ParallelismArgs"] = None,
) -> "tuple[LlamaForTraining, LlamaConfig]":
    """Build the checkpoint's Llama on `parallel_context` (any layout that fits) and load its weights.

    `dtype` defaults to config.yaml's `model.dtype`, else float32. Raises CheckpointError for a
    missing or unreadable checkpoint, LayoutError when the layout does not fit the model.
    """
    root = Path(path)
    model_config = read_model_config(root)
    for required in (WEIGHTS_FOLDER, METADATA_FILE):
        if not (root / required).exists():
            raise CheckpointError(
                f"Checkpoint {root} has no {required}: it is not a complete Nanotron checkpoint "
                "(was it written by save_weights / the trainer?)."
            )
    if dtype is None:
        dtype = read_checkpoint_dtype(root) or torch.float32
    model = build_nanotron_llama(model_config, parallel_context, dtype, device, parallel_config)
    from nanotron.serialize.weights import load_weights

    try:
        load_weights(model=model, parallel_context=parallel_context, root_folder=root)
    except (OSError, ValueError, KeyError, RuntimeError, AssertionError) as error:
        raise CheckpointError(
            f"Loading the weights of checkpoint {root} failed: {type(error).__name__}: {error}. "
            "Check that its model_config matches the saved weights."
        ) from error
    return model, model_config
