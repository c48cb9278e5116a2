"""The tiny model's Nanotron training config (see lighteval_nanotron.cpu.training)."""

from pathlib import Path
from typing import Any, Optional, Union

from lighteval_nanotron.cpu.training import build_training_config


def tiny_training_config(
    model_config: Any = None,
    checkpoints_path: Union[str, Path] = "checkpoints",
    tokenizer_path: Optional[str] = None,
    **overrides: Any,
) -> Any:
    """A Config for the tiny Llama (tests.helpers.tiny_model.tiny_llama_config() by default)."""
    if model_config is None:
        from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config

        model_config = tiny_llama_config()
    return build_training_config(model_config, checkpoints_path, tokenizer_path=tokenizer_path, **overrides)


def write_tiny_training_yaml(path: Union[str, Path], **kwargs: Any) -> Path:
    """Write `tiny_training_config(**kwargs)` as YAML to `path` and return it."""
    path = Path(path)
    tiny_training_config(**kwargs).save_as_yaml(str(path))
    return path
