"""Find what an evaluation wrote for a training step (the layout is in docs/tracking.md)."""

from pathlib import Path

from lighteval_nanotron.tracking.paths import safe_file_component, step_details_dir, step_results_file


def results_file(output_dir: Path, model_name: str, step: int) -> Path:
    path = step_results_file(output_dir, model_name, step)
    assert path is not None, f"no results file for step {step} of {model_name} under {output_dir}"
    return path


def details_folder(output_dir: Path, model_name: str, step: int) -> Path:
    folder = step_details_dir(output_dir, model_name, step)
    assert folder is not None, f"no details for step {step} of {model_name} under {output_dir}"
    return folder


def details_file(output_dir: Path, model_name: str, step: int, task: str) -> Path:
    folder = details_folder(output_dir, model_name, step)
    return folder / f"details_{safe_file_component(task)}_{folder.name}.parquet"
