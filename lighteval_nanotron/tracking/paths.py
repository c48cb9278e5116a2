"""Where results and details live under an output folder, and which steps are already there.

Layout (lighteval's, with the training step as the run id when there is one):

    <output_dir>/results/<model_name>/results_<step or timestamp>.json
    <output_dir>/details/<model_name>/<step or timestamp>/details_<task>.parquet
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from lighteval_nanotron.pipeline.result import EvaluationResult

_STEP_FILE = re.compile(r"^results_(\d+)\.json$")


def run_id(result: EvaluationResult) -> str:
    """The training step when known, else the start time as a filesystem-safe ISO timestamp."""
    if result.step is not None:
        return str(result.step)
    return datetime.fromtimestamp(result.start_time).isoformat().replace(":", "-")


def results_dir(output_dir: str | Path, model_name: str) -> Path:
    return Path(output_dir) / "results" / model_name.strip("/")


def results_path(output_dir: str | Path, result: EvaluationResult) -> Path:
    return results_dir(output_dir, result.model_name) / f"results_{run_id(result)}.json"


def details_dir(output_dir: str | Path, result: EvaluationResult) -> Path:
    return Path(output_dir) / "details" / result.model_name.strip("/") / run_id(result)


def details_path(output_dir: str | Path, result: EvaluationResult, task_name: str) -> Path:
    return details_dir(output_dir, result) / f"details_{task_name.replace('/', '_')}.parquet"


def evaluated_steps(output_dir: str | Path, model_name: str) -> set[int]:
    """Training steps that already have a complete results file for `model_name`.

    A restarted training run calls this once to skip steps it evaluated before the restart.
    Files that do not parse as JSON are ignored (they cannot come from our atomic writer).
    """
    folder = results_dir(output_dir, model_name)
    if not folder.is_dir():
        return set()
    steps = set()
    for path in folder.iterdir():
        match = _STEP_FILE.match(path.name)
        if match is None:
            continue
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        steps.add(int(match.group(1)))
    return steps
