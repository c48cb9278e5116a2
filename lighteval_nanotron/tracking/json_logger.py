"""The results file: lighteval's JSON layout (strict JSON), one file per step, written atomically
and merged with the tasks an earlier run wrote there (see `results_file`)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.tracking.atomic import atomic_write_text
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.output_lock import output_lock
from lighteval_nanotron.tracking.paths import results_file_content, results_path
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
    """The content of an existing results file; one that does not parse, or is not a results dict
    (valid JSON of another structure), is moved aside, not lost and not merged into."""
    if not path.exists():
        return None
    content, problem = results_file_content(path)
    if content is not None:
        return content
    aside = path.with_name(f"{path.name}.unreadable-{time.time_ns()}")
    os.replace(path, aside)
    logger.warning("Existing results file %s cannot be merged into (%s): moved to %s", path, problem, aside)
    return None


class ResultsJsonLogger(EvaluationLogger):
    """Writes `<output_dir>/results/<model_name>/<step>/results_<date_id>.json` (see `paths`)."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.last_path: Path | None = None

    def log(self, result: EvaluationResult) -> None:
        text = results_to_json(result)  # a value that cannot be written fails before the folder is locked
        with output_lock(self.output_dir):  # read, merge and replace: one writer of the folder at a time
            path = results_path(self.output_dir, result)
            earlier = _read_earlier(path)
            if earlier is not None:
                text = results_to_json(result, earlier)
            self.last_path = atomic_write_text(path, text)
        logger.info("Saved evaluation results to %s", path)
