"""The name a run's results are filed under (`results/<model_name>/<step>/`), one rule for both
ways in, so that `eval` of a run's checkpoints writes next to what its hook wrote."""

from __future__ import annotations


def model_name(option: str | None, project: str | None, run: str | None, fallback: str) -> str:
    """The `model_name` option when set, else the training's `project/run` (`project` without a
    run), else `fallback` (`eval`: the checkpoint folder's name)."""
    if option:
        return option
    if project:
        return f"{project}/{run}" if run else str(project)
    return fallback
