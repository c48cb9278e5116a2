"""`CheckpointEvalConfig`: the `eval` command's settings, `EvaluationOptions` (shared with the
training hook) plus which checkpoints, at which layout, on which device."""

from dataclasses import dataclass, field
from typing import Optional

from lighteval_nanotron.checkpoint_eval.loading import DTYPES
from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import EvaluationOptions
from lighteval_nanotron.options.base import choices
from lighteval_nanotron.options.flags import flag_name


@dataclass(kw_only=True)
class CheckpointEvalConfig(EvaluationOptions):
    """Which checkpoints, at which layout."""

    checkpoint: Optional[str] = field(default=None, metadata={"positional": True})
    """One checkpoint folder: `model/`, `checkpoint_metadata.json`, `model_config.json` and/or
    `config.yaml` (what the trainer and `lighteval-nanotron convert` write)."""

    checkpoints_dir: Optional[str] = None
    """Instead of one checkpoint: every numbered step folder of this training output folder, in
    step order, skipping the steps whose results are already in `output_dir` (a backfill)."""

    tp: int = 1
    """Tensor parallel size; `tp x pp x dp` must equal the number of processes."""

    pp: int = 1
    """Pipeline parallel size."""

    dp: int = 1
    """Data parallel size."""

    cpu: bool = False
    """Run on CPU with gloo (Nanotron patched by `enable_cpu_support()`); default: CUDA with NCCL."""

    dtype: Optional[str] = field(default=None, metadata=choices(tuple(DTYPES)))
    """Model dtype. Unset: the checkpoint's `model.dtype`, else float32."""

    tokenizer: Optional[str] = None
    """Tokenizer folder or Hub name. Unset: the checkpoint folder when it holds tokenizer files,
    else its `config.yaml`'s `tokenizer.tokenizer_name_or_path` (a relative path there is looked up
    from the training's working directory)."""

    def named(self, option: str) -> str:
        return flag_name(CheckpointEvalConfig, option)

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.checkpoint is None) == (self.checkpoints_dir is None):
            raise ConfigError(
                "Give exactly one of a checkpoint folder, --checkpoint-config-path or --checkpoints-dir "
                "(or checkpoints_path in the lighteval config)."
            )
