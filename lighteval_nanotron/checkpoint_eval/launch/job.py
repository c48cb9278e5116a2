"""One checkpoint's evaluation as a command: `lighteval_nanotron eval CHECKPOINT` with the training
hook's options, and the environment it runs in.

The command writes where the in-loop evaluation would (the hook's output folder, model name and
loggers) at the checkpoint's training step, with the consumed tokens from its metadata: a launched
evaluation is `eval CHECKPOINT`, nothing else. Its environment is the training's minus what would
make it join the training (torchrun's rendezvous variables, the Slurm step it runs in, W&B's run
identity), plus the evaluation's own variables (devices, W&B run, user settings).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lighteval_nanotron.tracking.paths import safe_relative_path

LAUNCH_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK",
)  # fmt: skip
"""torchrun's variables: inherited, they would make the evaluation join the training's process group."""
LAUNCH_PREFIXES = ("TORCHELASTIC_", "TORCH_ELASTIC_", "SLURM_")
KEPT = ("SLURM_CONF",)
"""Kept although its prefix is dropped: where the Slurm commands find the cluster."""
WANDB_RUN_VARIABLES = ("WANDB_RUN_ID", "WANDB_RESUME", "WANDB_NAME", "WANDB_RUN_GROUP", "WANDB_JOB_TYPE")
DATA_DIRS_VARIABLE = "LIGHTEVAL_NANOTRON_DATA_DIRS"


@dataclass(frozen=True)
class EvalJob:
    """What to run for one checkpoint, and where its script and output go."""

    step: int
    checkpoint: Path
    eval_args: list[str]
    """`eval CHECKPOINT --...`: the arguments after `python -m lighteval_nanotron`."""
    exports: dict[str, str]
    """Variables the script exports (the evaluation's own), on top of `base_env`."""
    base_env: dict[str, str]
    """The launching environment: the training's, cleaned."""
    scripts_dir: Path
    logs_dir: Path
    workdir: Path
    """The training's working directory: relative paths of the section mean the same there."""
    python: str
    name: str = field(default="")

    def eval_command(self) -> list[str]:
        return [self.python, "-m", "lighteval_nanotron", *self.eval_args]


def cleaned_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The training's environment without torchrun's, Slurm's step and W&B's run variables."""
    environ = os.environ if environ is None else environ
    return {
        key: value
        for key, value in environ.items()
        if key in KEPT
        or (key not in LAUNCH_VARIABLES and key not in WANDB_RUN_VARIABLES and not key.startswith(LAUNCH_PREFIXES))
    }


def eval_arguments(section: Any, checkpoint: Path, model_name: str, layout: Any, tokenizer: str | None) -> list[str]:
    """`eval CHECKPOINT ...` with the hook section's options (`section`: the `lighteval_nanotron:`
    fields), the evaluation's layout (`layout`: tp, pp, dp, cpu) and the training's tokenizer."""
    args = ["eval", str(checkpoint), "--tp", str(layout.tp), "--pp", str(layout.pp), "--dp", str(layout.dp)]
    if layout.cpu:
        args.append("--cpu")
    args += ["--tasks", ",".join(section.tasks), "--output-dir", str(Path(section.output_dir).resolve())]
    args += ["--model-name", model_name, "--loggers", *file_loggers(section.loggers)]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    for flag, value in (
        ("--custom-tasks", section.custom_tasks),
        ("--max-samples", section.max_samples),
        ("--fewshot-draws", section.fewshot_draws),
        ("--tokens-per-batch", section.tokens_per_batch),
        ("--system-prompt", section.system_prompt),
        ("--tensorboard-prefix", section.tensorboard_prefix),
        ("--failure-timeout-s", section.failure_timeout_s),
    ):
        if value is not None:
            args += [flag, str(value)]
    for directory in section.data_dirs or []:
        args += ["--data-dir", directory]
    if section.use_chat_template:
        args.append("--use-chat-template")
    if section.pairwise_tokenization:
        args.append("--pairwise-tokenization")
    if section.multichoice_continuations_start_space is not None:
        prefix = "--" if section.multichoice_continuations_start_space else "--no-"
        args.append(f"{prefix}multichoice-continuations-start-space")
    for key, value in (section.generation or {}).items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    if "wandb" in section.loggers:
        if section.wandb_project:
            args += ["--wandb-project", section.wandb_project]
        if section.wandb_entity:
            args += ["--wandb-entity", section.wandb_entity]
    return [*args, "--no-progress"]


def file_loggers(loggers: list[str]) -> list[str]:
    """The loggers an `eval` process has (`log`, the training log's table, is the hook's)."""
    return [name for name in loggers if name != "log"]


def job_folder(root: Path, model_name: str, step: int) -> Path:
    return root / safe_relative_path(model_name) / str(step)


def quoted(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def build_job(
    section: Any,
    settings: Any,
    step: int,
    checkpoint: Path,
    model_name: str,
    tokenizer: str | None,
    exports: Mapping[str, str] = (),
) -> EvalJob:
    """The job evaluating `checkpoint` (training step `step`) with the hook `section`'s options and
    its `asynchronous` settings; `exports`: variables for this evaluation only (its W&B run)."""
    import sys

    base_env = cleaned_environment()
    if section.data_dirs is not None:  # the section's data dirs replace the variable, as in the loop
        base_env.pop(DATA_DIRS_VARIABLE, None)
    own = dict(exports)
    if settings.slurm is not None and settings.slurm.hf_cache:
        cache = str(Path(settings.slurm.hf_cache).expanduser())
        own.update(HF_HOME=cache, HF_DATASETS_CACHE=cache, HUGGINGFACE_HUB_CACHE=cache)
    own.update(settings.env)
    scripts_root = Path(settings.scripts_dir or Path(section.output_dir) / "launches").resolve()
    logs_root = Path(settings.logs_dir).resolve() if settings.logs_dir else scripts_root
    return EvalJob(
        step=step,
        checkpoint=checkpoint,
        eval_args=eval_arguments(section, checkpoint, model_name, settings, tokenizer),
        exports=own,
        base_env=base_env,
        scripts_dir=job_folder(scripts_root, model_name, step),
        logs_dir=job_folder(logs_root, model_name, step),
        workdir=Path.cwd(),
        python=settings.python or sys.executable,
        name=f"eval-{safe_relative_path(model_name).name}-{step}",
    )
