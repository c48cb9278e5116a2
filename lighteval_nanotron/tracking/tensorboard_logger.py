"""TensorBoard scalars at the training step, in the trainer's writer or a folder of our own.

TensorBoard writes event files from a background thread; when a write fails there (a full disk),
the thread stores the error, which the next `add_scalar` / `flush` raises here (the results
loggers then report it in one line), and re-raises it, which Python's thread hook would print as
a traceback. `_quiet_writer_threads` keeps that second report to DEBUG level.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.scalars import result_scalars

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


logger = logging.getLogger(__name__)


def _quiet_writer_threads() -> None:
    """Install (once) a `threading.excepthook` that logs at DEBUG level the errors of TensorBoard's
    event-writer threads, whose writers raise them again in the writing thread, and passes every
    other thread's error to the hook that was there."""
    if getattr(threading.excepthook, "_lighteval_nanotron", False):
        return
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and "tensorboard" in type(args.thread).__module__:
            logger.debug(
                "TensorBoard's writer thread failed", exc_info=(args.exc_type, args.exc_value, args.exc_traceback)
            )
            return
        previous(args)

    hook._lighteval_nanotron = True  # type: ignore[attr-defined]
    threading.excepthook = hook


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
        _quiet_writer_threads()
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
