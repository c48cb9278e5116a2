"""The results file: lighteval's JSON layout (strict JSON), one file per step, written atomically
and merged with the tasks an earlier run wrote there (see `results_file`)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.atomic import atomic_write_text
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.paths import results_path
from lighteval_nanotron.tracking.results_file import merge_results, strict_json, with_max_samples

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


def results_to_json(result: EvaluationResult, earlier: dict[str, Any] | None = None) -> str:
    """Serialize the whole results dict (merged over `earlier`, a file's content) before any file
    is touched, so a bad value fails early."""
    content = with_max_samples(result.to_dict())
    return strict_json(content if earlier is None else merge_results(earlier, content), default=_json_default)


def _read_earlier(path: Path) -> dict[str, Any] | None:
    """The content of an existing results file; one that does not parse is moved aside, not lost."""
    if not path.exists():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(content, dict):
            return content
    except (OSError, ValueError):
        pass
    aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
    os.replace(path, aside)
    logger.warning("Existing results file %s does not parse as a results dict: moved to %s", path, aside)
    return None


class ResultsJsonLogger(EvaluationLogger):
    """Writes `<output_dir>/results/<model_name>/<step>/results_<date_id>.json` (see `paths`)."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.last_path: Path | None = None

    def log(self, result: EvaluationResult) -> None:
        path = results_path(self.output_dir, result)
        text = results_to_json(result, _read_earlier(path))
        self.last_path = atomic_write_text(path, text)
        logger.info("Saved evaluation results to %s", path)
