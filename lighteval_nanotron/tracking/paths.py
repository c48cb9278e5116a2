"""Where results and details live under an output folder, and which steps are already there.

Layout: lighteval's, with the model named `<model_name>/<step>` as lighteval's Nanotron entry
point names it when there is a training step (see docs/tracking.md):

    <output_dir>/results/<model_name>/<step>/results_<date_id>.json
    <output_dir>/details/<model_name>/<step>/<date_id>/details_<task>_<date_id>.parquet

and without a step `results/<model_name>/results_<date_id>.json`,
`details/<model_name>/<date_id>/details_<task>_<date_id>.parquet`. The `date_id` is the start
time of the step's first evaluation (`2024-12-02T16-12-00.123456`): a later evaluation of the
same step writes into the same files, so each step has one results file and one details folder.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from lighteval_nanotron.pipeline.result import EvaluationResult
from lighteval_nanotron.steps import numbered_folders

_RESULTS_FILE = re.compile(r"^results_(.+)\.json$")


def date_id(timestamp: float) -> str:
    """A time as lighteval names its runs: local ISO time with `:` replaced by `-`."""
    return datetime.fromtimestamp(timestamp).isoformat().replace(":", "-")


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
    """`<output_dir>/results/<model_name>`: the step folders (and step-less results files)."""
    return Path(output_dir) / "results" / safe_relative_path(model_name)


def step_results_dir(output_dir: str | Path, model_name: str, step: int | None) -> Path:
    folder = results_dir(output_dir, model_name)
    return folder if step is None else folder / str(step)


def step_details_root(output_dir: str | Path, model_name: str, step: int | None) -> Path:
    folder = Path(output_dir) / "details" / safe_relative_path(model_name)
    return folder if step is None else folder / str(step)


def _results_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and _RESULTS_FILE.match(p.name))


def step_results_file(output_dir: str | Path, model_name: str, step: int) -> Path | None:
    """The results file of a training step (the latest by date when a copy left several), if any."""
    files = _results_files(step_results_dir(output_dir, model_name, step))
    return files[-1] if files else None


def step_details_dir(output_dir: str | Path, model_name: str, step: int) -> Path | None:
    """The details folder of a training step (the latest by date), if any."""
    root = step_details_root(output_dir, model_name, step)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return folders[-1] if folders else None


def run_date_id(output_dir: str | Path, result: EvaluationResult) -> str:
    """The date id `result` is written under: the step's existing one, else its start time."""
    if result.step is not None:
        existing = step_results_file(output_dir, result.model_name, result.step)
        if existing is not None:
            return _RESULTS_FILE.match(existing.name).group(1)
        details = step_details_dir(output_dir, result.model_name, result.step)
        if details is not None:
            return details.name
    return date_id(result.start_time)


def results_path(output_dir: str | Path, result: EvaluationResult) -> Path:
    folder = step_results_dir(output_dir, result.model_name, result.step)
    return folder / f"results_{run_date_id(output_dir, result)}.json"


def details_dir(output_dir: str | Path, result: EvaluationResult) -> Path:
    return step_details_root(output_dir, result.model_name, result.step) / run_date_id(output_dir, result)


def details_path(output_dir: str | Path, result: EvaluationResult, task_name: str) -> Path:
    folder = details_dir(output_dir, result)
    return folder / f"details_{safe_file_component(task_name)}_{folder.name}.parquet"


def details_task_name(path: str | Path) -> str:
    """The task of a details file (`details_<task>_<date_id>.parquet` in its `<date_id>` folder)."""
    path = Path(path)
    return path.stem.removeprefix("details_").removesuffix(f"_{path.parent.name}")


def results_files_by_step(output_dir: str | Path, model_name: str) -> dict[int, Path]:
    """`{step: results file}` of the training steps written for `model_name`."""
    folder = results_dir(output_dir, model_name)
    found: dict[int, Path] = {}
    for step, step_folder in numbered_folders(folder):
        files = _results_files(step_folder)
        if files:
            found[step] = files[-1]
    return found


def results_file_content(path: str | Path) -> tuple[dict | None, str | None]:
    """`(content, None)` of a results file, or `(None, why it cannot be used)` when it does not read,
    parse (a byte-order mark is accepted) or have a results file's structure (`results_file_problem`)."""
    from lighteval_nanotron.tracking.results_file import results_file_problem

    try:
        content = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as error:
        return None, f"{type(error).__name__}: {error}"
    problem = results_file_problem(content)
    return (None, problem) if problem else (content, None)


def _parsed(path: Path) -> dict | None:
    return results_file_content(path)[0]


def evaluated_tasks_by_step(
    output_dir: str | Path, model_name: str, identity: dict[str, Any] | None = None
) -> dict[int, dict[tuple[str, int | None], str | None]]:
    """`{step: {(task, max_samples): data digest or None}}` of the results files already written
    for `model_name` under `identity` (`results_file.evaluated_tasks`; `setup.finished_steps`
    decides what is done).
    Files that do not parse as JSON, or are not results dicts, count as nothing done
    (the results logger moves such a file aside before it writes the step's results)."""
    from lighteval_nanotron.tracking.results_file import evaluated_tasks

    done: dict[int, dict[tuple[str, int | None], str | None]] = {}
    for step, path in results_files_by_step(output_dir, model_name).items():
        content = _parsed(path)
        if content is not None:
            done[step] = evaluated_tasks(content, identity)
    return done


def evaluated_steps(output_dir: str | Path, model_name: str) -> set[int]:
    """Training steps that already have a complete results file for `model_name`.

    Files that do not parse as JSON, or are not results dicts, are ignored (they cannot come from our
    atomic writer).
    """
    return {step for step, path in results_files_by_step(output_dir, model_name).items() if _parsed(path) is not None}
