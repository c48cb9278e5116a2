"""TensorBoard scalars at the training step, in the trainer's writer or a folder of our own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.scalars import result_scalars

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class TensorBoardLogger(EvaluationLogger):
    """Adds `eval/<task>/<metric>` scalars at `result.step` (0 when the result has no step).

    Pass `writer` to share the training run's `SummaryWriter` (it is then not closed here), or
    `log_dir` to open one.
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        writer: SummaryWriter | None = None,
        prefix: str = "eval",
    ) -> None:
        if (log_dir is None) == (writer is None):
            raise ValueError("TensorBoardLogger needs exactly one of `log_dir` or `writer`.")
        if writer is None:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(log_dir=str(log_dir))
            self._owns_writer = True
        else:
            self._owns_writer = False
        self.writer = writer
        self.prefix = prefix

    def log(self, result: EvaluationResult) -> None:
        step = result.step if result.step is not None else 0
        for tag, value in result_scalars(result, self.prefix).items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        if self._owns_writer:
            self.writer.close()
