"""What every family's Hugging Face conversion shares: the interface `lighteval-nanotron convert` calls
(`HfConversion`, one subclass in each family's `conversion.py`) and the `config.json` fields every
mapping reads the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.checkpoint.format import DEFAULT_ROPE_THETA


class HfConversion(ABC):
    """A family's Hugging Face checkpoints (`config.json` and weights) -> a Nanotron model config and
    full (unsharded) Nanotron weights. Subclasses set the class attributes and implement the methods."""

    title: ClassVar[str]
    """The architecture's name in messages, e.g. "Llama"."""
    model_types: ClassVar[tuple[str, ...]]
    """`config.json` `model_type`s the family converts, e.g. ("llama",)."""
    architectures: ClassVar[tuple[str, ...]]
    """Hugging Face classes the family converts, e.g. ("LlamaForCausalLM",)."""

    @classmethod
    def recognises(cls, hf_config: Mapping[str, Any]) -> bool:
        """True when `config.json` is one of the family's (by `model_type` or `architectures`)."""
        architectures = hf_config.get("architectures") or []
        return hf_config.get("model_type") in cls.model_types or any(
            name in architectures for name in cls.architectures
        )

    @classmethod
    @abstractmethod
    def nanotron_config(cls, hf_config: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """The Nanotron model config fields and the RoPE base; CheckpointError for options the target
        (or the engine) cannot represent."""

    @classmethod
    def recorded_fields(cls, model_config: Mapping[str, Any], rope_theta: float) -> dict[str, Any]:
        """The fields the converted checkpoint records (default: the model config's, which carry the RoPE base)."""
        return dict(model_config)

    @classmethod
    @abstractmethod
    def weights(
        cls,
        hf_weights: Mapping[str, torch.Tensor],
        model_config: Mapping[str, Any],
        rotary_layout: tuple[float, bool] | None,
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Full Nanotron weights, one at a time (a lazy `hf_weights` keeps about one layer in memory);
        `rotary_layout` is what the converted config reads back to (`CheckpointModel.rotary_layout`)."""


def rope_theta_from_hf(hf_config: Mapping[str, Any], target: str) -> float:
    """The plain-RoPE base; CheckpointError for RoPE scaling, which `target` (e.g. "Nanotron 0.4's
    Llama") does not have. transformers >= 5 writes `rope_parameters`; older versions a top-level
    `rope_theta`."""
    params = hf_config.get("rope_parameters") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    scaling = hf_config.get("rope_scaling")
    if rope_type != "default" or (scaling and scaling.get("rope_type", scaling.get("type")) != "default"):
        raise CheckpointError(
            f"RoPE scaling {scaling or params} is not supported: {target} has plain RoPE only. "
            "Convert a checkpoint without rope scaling."
        )
    return float(params.get("rope_theta", hf_config.get("rope_theta", DEFAULT_ROPE_THETA)))


def first_id(value: Any) -> int | None:
    """Llama 3 lists several eos ids; Nanotron's config holds one."""
    if isinstance(value, (list, tuple)):
        return int(value[0]) if value else None
    return None if value is None else int(value)
