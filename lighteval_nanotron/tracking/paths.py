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


def safe_relative_path(name: str) -> Path:
    """A name (a model name such as `org/model`, from the command line or a checkpoint's config)
    as a relative path that stays inside the folder it is joined to: `/` and `\\` separate
    components, empty and `.` components are dropped, `..` becomes `__`, NUL becomes `_`."""
    parts = [part.replace("\0", "_") for part in re.split(r"[/\\]+", str(name)) if part not in ("", ".")]
    parts = ["__" if part == ".." else part for part in parts]
    return Path(*parts) if parts else Path("model")


def safe_file_component(name: str) -> str:
    """A name used inside one file name (a task name): no separator, not `.`/`..`, no NUL."""
    cleaned = re.sub(r"[/\\\0]", "_", str(name))
    return "__" if cleaned in ("", ".", "..") else cleaned


def results_dir(output_dir: str | Path, model_name: str) -> Path:
    return Path(output_dir) / "results" / safe_relative_path(model_name)


def results_path(output_dir: str | Path, result: EvaluationResult) -> Path:
    return results_dir(output_dir, result.model_name) / f"results_{run_id(result)}.json"


def details_dir(output_dir: str | Path, result: EvaluationResult) -> Path:
    return Path(output_dir) / "details" / safe_relative_path(result.model_name) / run_id(result)


def details_path(output_dir: str | Path, result: EvaluationResult, task_name: str) -> Path:
    return details_dir(output_dir, result) / f"details_{safe_file_component(task_name)}.parquet"


def evaluated_tasks_by_step(output_dir: str | Path, model_name: str) -> dict[int, set[tuple[str, int | None]]]:
    """`{step: {(task, max_samples), ...}}` of the results files already written for `model_name`:
    a step is done for a task (its name carries the few-shot count) at a max_samples when that
    pair is there. Files that do not parse as JSON count as nothing done."""
    from lighteval_nanotron.tracking.results_file import evaluated_tasks

    folder = results_dir(output_dir, model_name)
    done: dict[int, set[tuple[str, int | None]]] = {}
    if not folder.is_dir():
        return done
    for path in folder.iterdir():
        match = _STEP_FILE.match(path.name)
        if match is None:
            continue
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(content, dict):
            done[int(match.group(1))] = evaluated_tasks(content)
    return done


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
