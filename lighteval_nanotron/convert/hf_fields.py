"""Hugging Face `config.json` fields read the same way by every family's mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.checkpoint.format import DEFAULT_ROPE_THETA


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
