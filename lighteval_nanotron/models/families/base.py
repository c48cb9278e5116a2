"""The model-family interface: what the engine, the builder, the converter and CPU support know of an
architecture.

A family is one folder under `models/families/` (`family.py` with its `ModelFamily` subclass,
`conversion.py`, `cpu_needs.py`, `tiny.py`), listed once in `FAMILIES`. The engine sees a built
Nanotron model only through it:

- `chain(model)`: the model's `PipelineBlock`s in forward order (embedding, decoder layers, final
  norm, lm_head, fp32 cast), each with how to call it; the PP schedule runs the slice a rank owns;
- `decoder_layer(module)`: a `DecoderLayer` view of one built layer (norms, attention projections
  with their local query/KV head layout, rotary or none, MLP), which the scoring tree attention
  and the KV cache run with explicit positions and masks;
- `max_positions`, `tp_mode`: the context window and the TP mode.

The builder sees the config side (`config_class`, `training_class`, `layout_sizes`,
`config_from_fields`); `lighteval-nanotron convert` the family's `hf_conversion()`; `enable_cpu_support()`
its `cpu_needs()`. Nothing outside a family's folder names a family's attribute.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import torch

from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
from lighteval_nanotron.options.base import describe_type, matches_type

if TYPE_CHECKING:
    from lighteval_nanotron.models.families.hf_conversion import HfConversion

ROPE_THETA_KEY = "rope_theta"
DEFAULT_ROPE_THETA = 10000.0
"""The RoPE base Nanotron 0.4's Llama always uses; its model config records `rope_theta` only when it differs."""


@dataclass(frozen=True)
class Rotary:
    """Rotary position embedding of a layer: its base and whether pairs are interleaved
    (`(x0, x1), (x2, x3), ...`, GPT-J style) or halves (`x[:d/2]`, `x[d/2:]`, GPT-NeoX style)."""

    base: float
    interleaved: bool


@dataclass(frozen=True)
class ChainBlock:
    """One `PipelineBlock` of a model's forward chain and how to call its module.

    `kind` is "layer" (decoder layer `layer_index`), "norm" (the final norm, before which the
    engine may select positions) or "other"."""

    block: Any
    run: Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor]
    kind: str = "other"
    layer_index: int = -1


class DecoderLayer(ABC):
    """A view of one built decoder layer (pre-norm residual blocks: attention, then MLP).

    Projections keep Nanotron's TP linears, so tensor parallelism is unchanged; head counts are
    those of this TP rank. Tensors are `[seq, rows, features]` as in Nanotron."""

    q_heads: int
    kv_heads: int
    head_dim: int
    rotary: Rotary | None

    @abstractmethod
    def attention_norm(self, hidden: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def qkv(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries `[seq, rows, q_heads * head_dim]`, keys and values `[seq, rows, kv_heads * head_dim]`;
        query head h attends with KV head `h // (q_heads // kv_heads)`."""

    @abstractmethod
    def attention_out(self, attended: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def mlp_norm(self, hidden: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def mlp(self, hidden: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class CpuNeeds:
    """What a family's Nanotron code needs to run on CPU with gloo: `enable_cpu_support()` applies the
    needs of every family the installed Nanotron has (`cpu.model_patches`; `trainer_replaced` with the
    trainer patches), each attribute replaced once and its original recorded."""

    p2p_modules: tuple[Any, ...] = ()
    """Nanotron modules whose `P2P` (pipeline sends, buffers made on "cuda") becomes the gloo-safe `CpuP2P`."""
    run_on_cpu: tuple[tuple[Any, str], ...] = ()
    """(owner, attribute) of functions that make tensors on "cuda": they run with cuda mapped to cpu."""
    replaced: tuple[tuple[Any, str, Any], ...] = ()
    """(owner, attribute, value): the family's CPU versions of Nanotron functions, and fixes of upstream
    bugs that CPU runs meet."""
    trainer_replaced: tuple[tuple[Any, str, Any], ...] = ()
    """As `replaced`, for the trainer's code paths (applied only with `enable_cpu_support(trainer=True)`)."""


REAL_NUMBER_FIELDS = ("rope_theta",)
"""Recorded as any real number whatever the config class annotates: Starcoder2's `rope_theta` is
annotated `int`, and Hugging Face models carry bases like 999999.44."""


def _is_size(name: str) -> bool:
    return name.startswith("num_") or name.endswith("_size") or name == "max_position_embeddings"


def check_field_values(config_class: type, fields: Mapping[str, Any], where: str) -> None:
    """CheckpointError naming `where`, the key and the type its class gives, for a recorded value of
    another type (`"false"` for a bool is truthy, `"1024"` or `4.0` for a size fails deep in the
    model build), and for a size or count (`num_*`, `*_size`) below 1."""
    try:
        hints = typing.get_type_hints(config_class)
    except (NameError, TypeError):  # annotations that do not resolve: only the sizes are checked
        hints = {}
    for key, value in fields.items():
        hint = float if key in REAL_NUMBER_FIELDS else hints.get(key, Any)
        if key.endswith("_token_id") and value is None:
            continue  # a tokenizer without that token (Nanotron annotates the ids `int`)
        if not matches_type(value, hint, whole_floats=True):
            raise CheckpointError(
                f"{where} has {key}={value!r}: give {describe_type(hint)} (fix that value in the checkpoint's "
                "model_config.json and the model.model_config section of its config.yaml)."
            )
        if _is_size(key) and isinstance(value, int) and value < 1:
            raise CheckpointError(f"{where} has {key}={value!r}: a size or count is 1 or more; fix that value.")


def dataclass_from_fields(config_class: type, fields: Mapping[str, Any], where: str) -> Any:
    """`config_class(**fields)`; CheckpointError naming `where` and the keys the class does not know,
    or a value of another type (`check_field_values`)."""
    unknown = sorted(set(fields) - {field.name for field in dataclasses.fields(config_class)})
    if unknown:
        raise CheckpointError(
            f"{where} has keys that the installed Nanotron's {config_class.__name__} does not know: "
            f"{', '.join(unknown)}. Install the Nanotron that wrote the checkpoint (see docs/engine.md)."
        )
    check_field_values(config_class, fields, where)
    return config_class(**fields)


class ModelFamily(ABC):
    """One Nanotron architecture. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    """Short name used in messages and docs, e.g. "llama"."""
    model_class_names: ClassVar[tuple[str, ...]]
    """Nanotron class names of the training model and its inner model, e.g. ("LlamaForTraining", "LlamaModel")."""
    carried_fields: ClassVar[dict[str, Any]] = {}
    """Recorded fields the installed config class may lack that the family applies to a built model
    (`apply_carried`), with their defaults: for 0.4's Llama, `rope_theta` and `rope_interleaved`."""
    inert_fields: ClassVar[dict[str, Any]] = {}
    """Recorded fields (of newer Nanotron configs) that do not change the logits, with the one value
    they must have (None: any value), e.g. `z_loss_enabled` (training loss only)."""
    config_class_name: ClassVar[str] = ""
    """The config class's name, for messages when the installed Nanotron lacks the family."""

    # Config side ---------------------------------------------------------------------------------

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why the installed Nanotron cannot build this family (it lacks its model), or None."""
        return None

    @classmethod
    def training_unavailable_reason(cls) -> str | None:
        """Why the installed Nanotron's trainer cannot take this family's config (the engine may still
        evaluate its checkpoints), or None."""
        return None

    @classmethod
    @abstractmethod
    def config_class(cls) -> type:
        """The installed Nanotron's model config dataclass of this family."""

    @classmethod
    @abstractmethod
    def training_class(cls) -> type:
        """The installed Nanotron's `...ForTraining` class."""

    @classmethod
    @abstractmethod
    def recognises_fields(cls, fields: Mapping[str, Any]) -> bool:
        """True when recorded model-config fields describe this family (unknown extra keys are
        refused later, by `config_from_fields`, with their names)."""

    @classmethod
    def config_from_fields(cls, fields: Mapping[str, Any], where: str) -> Any:
        """The model config from recorded fields; CheckpointError naming `where` for unknown keys."""
        return dataclass_from_fields(cls.config_class(), fields, where)

    @classmethod
    @abstractmethod
    def layout_sizes(cls, config: Any) -> dict[str, int]:
        """Sizes a TP degree must divide, by config field name."""

    @classmethod
    def unsupported_reason(cls, config: Any) -> str | None:
        """Why the engine cannot run a model with this config (an option it does not implement), or None."""
        return None

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Raise UnsupportedModelError when `unsupported_reason` gives one."""
        reason = cls.unsupported_reason(config)
        if reason is not None:
            raise UnsupportedModelError(reason)

    @classmethod
    def split_recorded_fields(cls, fields: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(config fields, carried fields) of recorded model-config fields: keys of the installed config
        class, keys in `carried_fields` it lacks (their defaults filled in), inert keys dropped once
        checked. Unknown keys stay in the config fields, for `config_from_fields` to name."""
        config_keys = {field.name for field in dataclasses.fields(cls.config_class())}
        config_fields, carried = {}, {}
        for key, value in fields.items():
            if key in config_keys:
                config_fields[key] = value
            elif key in cls.carried_fields:
                carried[key] = value
            elif key in cls.inert_fields:
                required = cls.inert_fields[key]
                if required is not None and value != required:
                    raise UnsupportedModelError(
                        f"{where} has {key}={value!r}: the installed Nanotron's {cls.config_class().__name__} "
                        f"cannot represent it (only {key}={required!r} is supported)."
                    )
            else:
                config_fields[key] = value
        missing = {key: default for key, default in cls.carried_fields.items() if key not in config_keys}
        return config_fields, {**missing, **carried}

    @classmethod
    def apply_carried(cls, model: torch.nn.Module, carried: Mapping[str, Any]) -> None:
        """Apply carried fields with non-default values to a built model (default: there are none)."""
        if any(value != cls.carried_fields.get(key) for key, value in carried.items()):
            raise UnsupportedModelError(f"A {cls.name} model cannot take the recorded fields {dict(carried)}.")

    @classmethod
    def num_layers(cls, config: Any) -> int:
        return int(config.num_hidden_layers)

    @classmethod
    def hf_conversion(cls) -> type[HfConversion] | None:
        """How `lighteval-nanotron convert` maps the family's Hugging Face checkpoints (None: it does not)."""
        return None

    @classmethod
    def cpu_needs(cls) -> CpuNeeds:
        """What the family's Nanotron modules need to run on CPU/gloo (imports them: call after
        `import_nanotron()`, only when `unavailable_reason()` is None)."""
        return CpuNeeds()

    # Built model side ----------------------------------------------------------------------------

    @classmethod
    def inner_model(cls, model: Any) -> Any:
        """The inner model (with the `PipelineBlock` chain) of a training model, a DDP wrapper of
        one, or the inner model itself."""
        inner_name = cls.model_class_names[-1]
        while type(model).__name__ != inner_name:
            if hasattr(model, "module"):
                model = model.module
            elif hasattr(model, "model"):
                model = model.model
            else:
                raise UnsupportedModelError(f"{type(model).__name__} holds no Nanotron {inner_name}.")
        return model

    @classmethod
    @abstractmethod
    def chain(cls, inner: Any) -> list[ChainBlock]:
        """The inner model's `PipelineBlock`s in forward order."""

    @classmethod
    @abstractmethod
    def decoder_layer(cls, module: Any) -> DecoderLayer:
        """A view of one built decoder layer (the module inside a decoder `PipelineBlock`)."""

    @classmethod
    def config_of(cls, model: Any) -> Any:
        """The model config a built model (training model, DDP wrapper or inner model) holds."""
        config_class = cls.config_class()
        candidate = model
        while candidate is not None:
            config = getattr(candidate, "config", None)
            if isinstance(config, config_class):
                return config
            inner = getattr(candidate, "module", None)
            candidate = inner if inner is not None else getattr(candidate, "model", None)
        raise UnsupportedModelError(
            f"{type(model).__name__} holds no {config_class.__name__}: pass the {cls.model_class_names[0]} "
            "model (or its DDP wrapper)."
        )

    @classmethod
    def max_positions(cls, config: Any) -> int:
        """The context window of the model."""
        return int(config.max_position_embeddings)
