"""The bash script of one launched evaluation: a local one (`bash eval.sh`) or a Slurm batch script.

Both change to the training's working directory, run the Slurm `env_setup` lines, export the
evaluation's own variables and run `python -m lighteval_nanotron eval CHECKPOINT ...`: locally
under `timeout` (so that it ends even if the training is gone) and torchrun's standalone
rendezvous (its own free port) when it has several processes; in Slurm with one `srun` task per
process (torchrun's variables are then read from Slurm's, `parallel/launch_env.py`).

A Slurm template (`slurm.template`) is a file with `${sbatch}`, `${setup}` and `${command}`
(and optionally `${step}`, `${checkpoint}`, `${job_name}`) where those go; other `$` text (shell
variables) is left as written.

sbatch reads a `#SBATCH` line its own way, not as the shell does: it splits it at white space, a
`#` starts a comment, quotes group and `\` escapes; `--output` is a filename pattern besides (`%j`;
`%%` is a `%`, and any `\` turns the patterns off and is dropped). So each value we write there
is quoted for sbatch when it is not plain (unquoted, a path with a space is an invalid directive:
every launch fails), `%` in the log folder is doubled, and what cannot be written (a line break; a `\`
in the log folder) is a ConfigError at setup.
"""

from __future__ import annotations

import math
import re
import string
from pathlib import Path

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.launch.job import EvalJob, quoted
from lighteval_nanotron.options.launch import AsyncEvaluationConfig

DEFAULT_TEMPLATE = "#!/bin/bash\n${sbatch}\n${setup}\n${command}\n"
SBATCH_PLAIN = re.compile(r"[A-Za-z0-9_./:=%,@+-]*")
"""Characters a `#SBATCH` value may have unquoted."""
PLACEHOLDERS = ("sbatch", "setup", "command", "step", "checkpoint", "job_name")
REQUIRED = {
    "sbatch": "the #SBATCH lines: without them the job has no --output (its log is not where the hook reads it) "
    "and one task whatever tp x pp x dp",
    "setup": "the cd to the training's folder and the exports: without them relative paths (the output folder) "
    "and the evaluation's own variables (its W&B run) are not the training's",
    "command": "where the evaluation runs",
}
"""The placeholders a template must place, and what is lost without each."""
KILL_AFTER_S = 30
"""Seconds `timeout` waits after its SIGTERM before SIGKILL."""


def _setup_lines(job: EvalJob, env_setup: list[str]) -> list[str]:
    lines = [
        f"# lighteval-nanotron: evaluation of checkpoint {job.checkpoint} (training step {job.step}),",
        "# launched by the training hook's asynchronous mode (docs/hook.md).",
        "set -euo pipefail",
        f"cd {quoted([str(job.workdir)])}",
        *env_setup,
    ]
    lines += [f"export {name}={quoted([value])}" for name, value in sorted(job.exports.items())]
    return lines


def local_script(job: EvalJob, settings: AsyncEvaluationConfig) -> str:
    """`bash` runs it in its own session; `exec` makes the evaluation the session leader's process."""
    command = job.eval_command()
    if settings.world_size > 1:
        command = [
            job.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(settings.world_size),
            "-m", "lighteval_nanotron", *job.eval_args,
        ]  # fmt: skip
    limit = ["timeout", f"--kill-after={KILL_AFTER_S}", f"{settings.timeout_s}s"]
    lines = ["#!/bin/bash", *_setup_lines(job, []), f"exec {quoted([*limit, *command])}"]
    return "\n".join(lines) + "\n"


def sbatch_options(job: EvalJob, settings: AsyncEvaluationConfig) -> list[str]:
    """The `#SBATCH` options: one task per evaluation process, on as many nodes as the GPUs need."""
    slurm = settings.slurm
    world = settings.world_size
    options = [f"--job-name={sbatch_value(job.name, 'the job name')}", f"--output={_output_pattern(job.logs_dir)}"]
    if settings.cpu:
        options += ["--nodes=1", f"--ntasks={world}"]
    else:
        per_node = min(world, slurm.gpus_per_node)
        options += [f"--nodes={world // per_node}", f"--ntasks-per-node={per_node}", f"--gpus-per-node={per_node}"]
    if slurm.cpus_per_task is not None:
        options.append(f"--cpus-per-task={slurm.cpus_per_task}")
    limit = slurm.time or str(math.ceil(settings.timeout_s / 60))
    options.append(f"--time={sbatch_value(limit, slurm.named('time'))}")
    for name in ("partition", "account", "qos", "reservation"):
        if getattr(slurm, name):
            options.append(f"--{name}={sbatch_value(str(getattr(slurm, name)), slurm.named(name))}")
    return options + [str(option) for option in slurm.extra_sbatch]


def sbatch_value(value: str, what: str) -> str:
    """`value` as sbatch reads it back from a `#SBATCH` line: as written when plain, else in double
    quotes with `\\` and `"` escaped. A line break cannot be written there: ConfigError naming `what`."""
    if "\n" in value or "\r" in value:
        raise ConfigError(f"{what} {value!r} has a line break: a #SBATCH line cannot hold it; remove it.")
    if SBATCH_PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _output_pattern(logs_dir: Path) -> str:
    """`--output`'s value: `<logs_dir>/slurm-%j.out`, the folder's own `%` doubled (literal)."""
    folder = str(logs_dir)
    if "\\" in folder:
        raise ConfigError(
            f"The evaluation's log folder {folder} has a backslash: Slurm drops it from --output (the job's "
            "output would go elsewhere). Set lighteval_nanotron.asynchronous.logs_dir to a folder without one."
        )
    return sbatch_value(folder.replace("%", "%%") + "/slurm-%j.out", "--output")


def slurm_script(job: EvalJob, settings: AsyncEvaluationConfig) -> str:
    slurm = settings.slurm
    values = {
        "sbatch": "\n".join(f"#SBATCH {option}" for option in sbatch_options(job, settings)),
        "setup": "\n".join(_setup_lines(job, list(slurm.env_setup))),
        "command": quoted(["srun", "--kill-on-bad-exit=1", *job.eval_command()]),
        "step": str(job.step),
        "checkpoint": str(job.checkpoint),
        "job_name": job.name,
    }
    return string.Template(read_template(slurm.template)).safe_substitute(values)


def read_template(path: str | None) -> str:
    """The Slurm script template (the default when `path` is None), checked: it must place
    `${sbatch}`, `${setup}` and `${command}` (`REQUIRED`), and every lowercase `${name}` in it must
    be one of ours (a typo would leave the script without a part)."""
    if path is None:
        return DEFAULT_TEMPLATE
    where = "lighteval_nanotron.asynchronous.slurm.template"
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigError(f"{where} {path}: cannot read it ({error.strerror}).") from error
    unknown = sorted({name for name in re.findall(r"\$\{([a-z_]+)\}", text) if name not in PLACEHOLDERS})
    if unknown:
        known = ", ".join("${" + name + "}" for name in PLACEHOLDERS)
        raise ConfigError(f"{where} {path} has unknown placeholder(s) {unknown}: use {known}.")
    for name, why in REQUIRED.items():
        if "${" + name + "}" not in text:
            raise ConfigError(f"{where} {path} has no ${{{name}}}: put it in ({why}; docs/hook.md).")
    return text
