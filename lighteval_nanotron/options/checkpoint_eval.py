"""`CheckpointEvalConfig`: the `eval` command's settings, `EvaluationOptions` (shared with the
training hook) and `LayoutOptions` (shared with the hook's asynchronous evaluations) plus which
checkpoints."""

import dataclasses
from dataclasses import dataclass, field
from typing import Optional, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import EvaluationOptions, LayoutOptions
from lighteval_nanotron.options.base import choices, path, scores
from lighteval_nanotron.options.flags import flag_name

MAX_POLL_INTERVAL_S = 3600.0
DTYPES = ("float32", "bfloat16", "float16")
"""The `dtype` choices, torch's names (declared here, without torch, so that the options stay light)."""


@dataclass(kw_only=True)
class CheckpointEvalConfig(LayoutOptions, EvaluationOptions):
    """Which checkpoints."""

    checkpoint: Optional[str] = field(default=None, metadata=path(positional=True))
    """One checkpoint folder: `model/`, `checkpoint_metadata.json`, `model_config.json` and/or
    `config.yaml` (what the trainer and `lighteval-nanotron convert` write)."""

    checkpoints_dir: Optional[str] = field(default=None, metadata=path())
    """Instead of one checkpoint: every numbered step folder of this training output folder, in
    step order, skipping the steps whose results are already in `output_dir` (a backfill)."""

    dtype: Optional[str] = field(default=None, metadata=choices(tuple(DTYPES), **scores("measured")))
    """Model dtype. Unset: the checkpoint's `model.dtype`, else float32."""

    tokenizer: Optional[str] = field(default=None, metadata=path(**scores("measured")))
    """Tokenizer folder or Hub name. Unset: the checkpoint folder when it holds tokenizer files,
    else its `config.yaml`'s `tokenizer.tokenizer_name_or_path` (a relative path there is looked up
    from the training's working directory)."""

    watch: bool = False
    """With `checkpoints_dir`: keep following the folder while a training writes it, evaluating
    each checkpoint once it is complete (and its files have stopped changing), until the training's
    last checkpoint, a `stop_file` or SIGINT/SIGTERM (docs/eval.md, "Following a running training")."""

    poll_interval_s: Union[int, float] = 30.0
    """With `watch`: seconds between two looks at the folder when nothing is ready (at most 3600)."""

    settle_s: Union[int, float] = 60.0
    """With `watch`: seconds a complete checkpoint's files must stay unchanged before it is evaluated."""

    skip_to_newest: bool = False
    """With `watch`: when several checkpoints are waiting, evaluate the newest and leave the older
    ones to a later backfill (default: oldest first)."""

    stop_file: Optional[str] = field(default=None, metadata=path())
    """With `watch`: stop, after the evaluation in progress, once this file exists."""

    def named(self, option: str) -> str:
        return flag_name(CheckpointEvalConfig, option)

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.checkpoint is None) == (self.checkpoints_dir is None):
            raise ConfigError(
                "Give exactly one of a checkpoint folder, --checkpoint-config-path or --checkpoints-dir "
                "(or checkpoints_path in the lighteval config)."
            )
        if not 0 < self.poll_interval_s <= MAX_POLL_INTERVAL_S:
            raise ConfigError(
                f"--poll-interval-s {self.poll_interval_s}: use a number of seconds in (0, {MAX_POLL_INTERVAL_S:.0f}]."
            )
        if self.settle_s < 0:
            raise ConfigError(f"--settle-s {self.settle_s}: use a number of seconds >= 0.")
        self.poll_interval_s, self.settle_s = float(self.poll_interval_s), float(self.settle_s)

    def check_watch(self) -> None:
        """The watch options make sense together (checked when the command runs: each flag alone is valid)."""
        if not self.watch:
            given = [
                self.named(name)
                for name in ("poll_interval_s", "settle_s", "skip_to_newest", "stop_file")
                if getattr(self, name) != _default(name)
            ]
            if given:
                raise ConfigError(
                    f"{', '.join(given)} only {'apply' if len(given) > 1 else 'applies'} with --watch: add it."
                )
            return
        if self.checkpoints_dir is None:
            raise ConfigError(
                "--watch follows a folder of checkpoints: give --checkpoints-dir (the trainer's checkpoints_path)."
            )
        if self.poll_interval_s >= self.failure_timeout_s:
            raise ConfigError(
                f"--poll-interval-s {self.poll_interval_s} is not below --failure-timeout-s {self.failure_timeout_s}: "
                "a rank woken by a signal waits up to one poll interval for the others."
            )


def _default(name: str) -> object:
    return next(f.default for f in dataclasses.fields(CheckpointEvalConfig) if f.name == name)
