"""One checkpoint's evaluation as a command: `lighteval_nanotron eval CHECKPOINT` with the training
hook's options, and the environment it runs in.

The command writes where the in-loop evaluation would (the hook's output folder, model name and
loggers) at the checkpoint's training step, with the consumed tokens from its metadata: a launched
evaluation is `eval CHECKPOINT`, nothing else. Its environment is the training's minus what would
make it join the training (torchrun's rendezvous variables, the Slurm step it runs in, W&B's run
identity), plus the evaluation's own variables (devices, W&B run, user settings).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lighteval_nanotron.options import EvaluationOptions, LayoutOptions
from lighteval_nanotron.options.flags import as_arguments, flag_name
from lighteval_nanotron.options.launch import AsyncEvaluationConfig
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


LAYOUT = [f.name for f in dataclasses.fields(LayoutOptions)]

SET_BY_THE_LAUNCH = ("model_name", "progress_bar", "wandb_project", "wandb_run_name", "wandb_run_id", "wandb_group")
"""Shared options the launched evaluation gets from the launch, not the section as written: the
resolved results name, no progress bars, and its own W&B run (`wandb`)."""


def eval_arguments(
    section: EvaluationOptions,
    checkpoint: Path,
    model_name: str,
    layout: LayoutOptions,
    tokenizer: str | None,
    wandb: Mapping[str, str] | None = None,
) -> list[str]:
    """`eval CHECKPOINT ...`: every shared option of the hook `section` and of the evaluation's
    `layout` as its flag (generated from `EvaluationOptions` and `LayoutOptions`, the declarations
    `eval` parses them by), the training's tokenizer, and `wandb` (`{option: value}` of the
    evaluation's own W&B run)."""
    args = ["eval", str(checkpoint), *as_arguments(layout, LayoutOptions, LAYOUT)]
    shared = [f.name for f in dataclasses.fields(EvaluationOptions) if f.name not in SET_BY_THE_LAUNCH]
    args += as_arguments(section, EvaluationOptions, shared)
    args += ["--model-name", model_name, "--no-progress"]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    for option, value in (wandb or {}).items():
        args += [flag_name(EvaluationOptions, option), value]
    return args


def job_folder(root: Path, model_name: str, step: int) -> Path:
    return root / safe_relative_path(model_name) / str(step)


def quoted(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def build_job(
    section: EvaluationOptions,
    settings: AsyncEvaluationConfig,
    step: int,
    checkpoint: Path,
    model_name: str,
    tokenizer: str | None,
    wandb: Mapping[str, str] | None = None,
) -> EvalJob:
    """The job evaluating `checkpoint` (training step `step`) with the hook `section`'s options and
    its `asynchronous` settings; `wandb`: the evaluation's own W&B run options."""
    import sys

    exports: dict[str, str] = {}
    if settings.slurm is not None and settings.slurm.hf_cache:
        cache = settings.slurm.hf_cache
        exports.update(HF_HOME=cache, HF_DATASETS_CACHE=cache, HUGGINGFACE_HUB_CACHE=cache)
    exports.update(settings.env)
    scripts_root = Path(settings.scripts_dir or Path(section.output_dir) / "launches").resolve()
    logs_root = Path(settings.logs_dir).resolve() if settings.logs_dir else scripts_root
    return EvalJob(
        step=step,
        checkpoint=checkpoint,
        eval_args=eval_arguments(section, checkpoint, model_name, settings, tokenizer, wandb),
        exports=exports,
        base_env=cleaned_environment(),
        scripts_dir=job_folder(scripts_root, model_name, step),
        logs_dir=job_folder(logs_root, model_name, step),
        workdir=Path.cwd(),
        python=settings.python or sys.executable,
        name=f"eval-{safe_relative_path(model_name).name}-{step}",
    )
