"""The training loss next to the evaluations: `<output_dir>/training/<model_name>/loss.jsonl`.

One JSON line per logged training step (`step`, `consumed_tokens`, `lm_loss`), appended by the
hook on the reporting rank at Nanotron's logging interval, read back by the overview plot.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from lighteval_nanotron.tracking.paths import safe_relative_path

logger = logging.getLogger(__name__)


def training_loss_path(output_dir: str | Path, model_name: str) -> Path:
    return Path(output_dir) / "training" / safe_relative_path(model_name) / "loss.jsonl"


class TrainingLossLog:
    """Appends one line per call; the file survives restarts (a re-logged step replaces the old one on read).
    A line that cannot be written (a full disk) is skipped with one warning: training goes on."""

    def __init__(self, output_dir: str | Path, model_name: str) -> None:
        self.path = training_loss_path(output_dir, model_name)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.failed = False

    def append(self, step: int, consumed_tokens: int, lm_loss: float) -> None:
        if not math.isfinite(lm_loss):
            return
        line = json.dumps({"step": step, "consumed_tokens": consumed_tokens, "lm_loss": lm_loss}) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as stream:
                stream.write(line)
        except OSError as error:
            if not self.failed:
                logger.warning("The training loss cannot be appended to %s (%s): the overview plot will miss it.",
                               self.path, error)  # fmt: skip
            self.failed = True


def read_training_loss(path: str | Path) -> list[tuple[int, float]]:
    """(step, lm_loss) in step order, the last line of a step winning; [] when there is no file."""
    path = Path(path)
    if not path.is_file():
        return []
    by_step: dict[int, float] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        try:
            row = json.loads(line)
            by_step[int(row["step"])] = float(row["lm_loss"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash
    return sorted(by_step.items())
