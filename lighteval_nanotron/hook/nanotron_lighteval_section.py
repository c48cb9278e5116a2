"""Nanotron's own `lighteval:` training-config section (`LightEvalConfig`) mapped onto ours.

Nanotron 0.4 parses that section and then never uses it, so a run with it trained without any
evaluation. Here it becomes a `lighteval_nanotron:` section (evaluated at every checkpoint and at
the end, as Nanotron's lighteval runner would), with a log of what mapped and what has no
equivalent. Both sections at once are refused: which one wins would be a guess.
"""

from __future__ import annotations

import logging
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.config import EvaluationConfig

logger = logging.getLogger(__name__)

# Fields of Nanotron's section that the hook has no use for, and why.
_NO_EQUIVALENT = {
    "slurm_template": "the hook evaluates in the training job itself",
    "slurm_script_dir": "the hook evaluates in the training job itself",
    "checkpoints_path": "the hook evaluates the live model",
    "parallelism": "the hook evaluates on the training mesh",
    "batch_size": "batches are sized by tokens_per_batch",
    "generation": "generation is greedy here",
}


def _get(section: Any, *path: str) -> Any:
    for name in path:
        section = getattr(section, name, None) if section is not None else None
    return section


def evaluation_from_nanotron_section(section: Any) -> EvaluationConfig:
    """The hook's section equivalent to Nanotron's `lighteval:` section; logs what did not map."""
    tasks = _get(section, "tasks", "tasks")
    if not tasks:
        raise ConfigError("lighteval.tasks.tasks is empty: set it to task specs, e.g. 'lighteval|arc:easy|0'.")
    mapped = {"tasks": tasks}
    for ours, path in (("custom_tasks", ("tasks", "custom_tasks")), ("max_samples", ("tasks", "max_samples"))):
        if _get(section, *path) is not None:
            mapped[ours] = _get(section, *path)
    if _get(section, "logging", "local_output_path") is not None:
        mapped["output_dir"] = str(_get(section, "logging", "local_output_path"))
    loggers = ["json", "details", "log"]
    if _get(section, "logging", "push_results_to_tensorboard"):
        loggers.append("tensorboard")
    if _get(section, "wandb", "wandb_project"):
        loggers.append("wandb")
        mapped["wandb_project"] = _get(section, "wandb", "wandb_project")
    mapped["loggers"] = loggers
    ignored = [f"{name} ({why})" for name, why in _NO_EQUIVALENT.items() if getattr(section, name, None) is not None]
    for path in (("tasks", "num_fewshot_seeds"), ("tasks", "multichoice_continuations_start_space")):
        if _get(section, *path) is not None:
            ignored.append(".".join(path))
    for name in ("push_results_to_hub", "push_details_to_hub", "hub_repo_results", "hub_repo_details"):
        if _get(section, "logging", name):
            ignored.append(f"logging.{name} (results are written locally)")
    logger.warning(
        "Nanotron's lighteval: section is evaluated by lighteval_nanotron at every checkpoint and at the end. "
        "Mapped: %s. No equivalent, ignored: %s.",
        ", ".join(f"{key}={value!r}" for key, value in mapped.items()),
        ", ".join(ignored) or "none",
    )
    return EvaluationConfig(**mapped, eval_at_checkpoints=True, eval_at_end=True)


def merge_sections(nanotron_section: Any, ours: EvaluationConfig | None) -> EvaluationConfig | None:
    """Our section, or the one mapped from Nanotron's; refused when both are present."""
    if nanotron_section is None:
        return ours
    if ours is not None:
        raise ConfigError(
            "The training config has both a lighteval: section (Nanotron's) and a lighteval_nanotron: section: "
            "keep one (lighteval_nanotron: has every option of the hook)."
        )
    return evaluation_from_nanotron_section(nanotron_section)
