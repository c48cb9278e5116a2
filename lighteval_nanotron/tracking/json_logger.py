"""The results file: lighteval's JSON layout, written atomically, one file per step."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.atomic import atomic_write_text
from lighteval_nanotron.tracking.base import EvaluationLogger
from lighteval_nanotron.tracking.paths import results_path

logger = logging.getLogger(__name__)


def _json_default(value: Any) -> Any:
    """Numpy scalars and arrays, sets and enums become plain JSON; anything else is an error."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "value") and isinstance(value.value, (str, int)):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def results_to_json(result: EvaluationResult) -> str:
    """Serialize the whole results dict before any file is touched, so a bad value fails early."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=_json_default)


class ResultsJsonLogger(EvaluationLogger):
    """Writes `<output_dir>/results/<model_name>/results_<step or timestamp>.json`."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.last_path: Path | None = None

    def log(self, result: EvaluationResult) -> None:
        text = results_to_json(result)
        path = results_path(self.output_dir, result)
        if path.exists():
            logger.warning("Replacing existing results file %s", path)
        self.last_path = atomic_write_text(path, text)
        logger.info("Saved evaluation results to %s", path)
