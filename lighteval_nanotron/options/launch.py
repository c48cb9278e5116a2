"""The `asynchronous:` settings of the hook section: where and how each saved checkpoint's
evaluation is launched (a local process group, or a Slurm job), checked when the YAML is read.

    lighteval_nanotron:
      tasks: "lighteval|arc:easy|0"
      eval_at_checkpoints: true
      asynchronous:
        launcher: slurm            # or local
        tp: 2                      # the evaluation's layout (any, not the training's)
        max_in_flight: 2
        slurm: {partition: eval, gpus_per_node: 8, time: "01:00:00", account: my-account,
                env_setup: ["source /shared/venv/bin/activate"]}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options import LayoutOptions
from lighteval_nanotron.options.base import Options, choices, path, renamed_from

LAUNCHERS = ("local", "slurm")
WHERE = "lighteval_nanotron.asynchronous"


@dataclass(kw_only=True)
class SlurmSettings(Options):
    """The Slurm job that evaluates one checkpoint (one task per GPU, or per CPU process with `cpu`)."""

    partition: Optional[str] = None
    """`--partition`. Unset: the cluster's default partition."""
    account: Optional[str] = None
    """`--account`. Unset: your default account."""
    qos: Optional[str] = None
    """`--qos`. Unset: the cluster's default."""
    reservation: Optional[str] = None
    """`--reservation`. Unset: none."""
    time: Optional[str] = None
    """`--time` (e.g. `"01:00:00"`). Unset: from `timeout_s`."""
    gpus_per_node: int = 8
    """GPUs per node of the evaluation job; nodes = tp x pp x dp / gpus_per_node (ignored with `cpu`)."""
    cpus_per_task: Optional[int] = None
    """`--cpus-per-task` (per evaluation process). Unset: the cluster's default."""
    env_setup: Optional[List[str]] = None
    """Shell lines run before the evaluation (`module load ...`, `source venv/bin/activate`)."""
    extra_sbatch: Optional[List[str]] = None
    """More `#SBATCH` options, e.g. `--constraint=h100` or `--exclusive`."""
    template: Optional[str] = field(default=None, metadata=path())
    """A script template file that places `${sbatch}` (the `#SBATCH` lines), `${setup}` (cd, env_setup,
    exports) and `${command}` (the srun line), each required, and may place `${step}`, `${checkpoint}`,
    `${job_name}`. Unset: those three in that order."""
    hf_cache: Optional[str] = field(default=None, metadata=path())
    """Hugging Face cache of the job (exported as `HF_HOME`, `HF_DATASETS_CACHE`, `HUGGINGFACE_HUB_CACHE`)."""

    def named(self, option: str) -> str:
        return f"{WHERE}.slurm.{option}"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.env_setup = list(self.env_setup or [])
        self.extra_sbatch = list(self.extra_sbatch or [])
        self.check_positive("gpus_per_node", "(GPUs per node of the evaluation job)")
        self.check_positive("cpus_per_task", "or remove it")
        for line in self.extra_sbatch:
            if not str(line).startswith("-"):
                raise ConfigError(
                    f"{WHERE}.slurm.extra_sbatch has {line!r}: give sbatch options such as '--exclusive' "
                    "(each becomes one #SBATCH line)."
                )


@dataclass(kw_only=True)
class AsyncEvaluationConfig(LayoutOptions):
    """Evaluate each saved checkpoint in its own process group while training goes on. The layout
    keys (`tp`, `pp`, `dp`, `cpu`) are `LayoutOptions`, declared once with `eval`'s flags."""

    launcher: str = field(default="local", metadata=choices(LAUNCHERS))
    """`local`: processes on this machine (`devices`, or `cpu`); `slurm`: one `sbatch` job per checkpoint."""
    devices: Optional[Union[str, List[int]]] = None
    """Local on GPUs: the GPUs the evaluations use (`"6,7"` or `[6, 7]`, as CUDA_VISIBLE_DEVICES),
    split into groups of tp x pp x dp, one group per evaluation in flight."""
    max_in_flight: int = 1
    """At most this many evaluations running (or queued in Slurm) at once; later checkpoints wait
    their turn without holding up training."""
    timeout_s: int = 21600
    """An evaluation running longer is stopped and recorded as failed (local: killed; Slurm: `--time`)."""
    status_interval_s: Union[int, float] = field(default=30.0, metadata=renamed_from("poll_interval_s"))
    """Seconds (at least) between two checks of how the evaluations in flight are doing, made
    between training steps."""
    python: Optional[str] = field(default=None, metadata=path())
    """The Python that runs `lighteval_nanotron eval`. Unset: the training's interpreter."""
    env: Optional[Dict[str, str]] = None
    """Environment variables of the evaluation (besides the training's own)."""
    scripts_dir: Optional[str] = field(default=None, metadata=path())
    """Where each launch's script goes (`<scripts_dir>/<model>/<step>/`). Unset: `<output_dir>/launches`."""
    logs_dir: Optional[str] = field(default=None, metadata=path())
    """Where each evaluation's output goes (`<logs_dir>/<model>/<step>/`). Unset: `scripts_dir`."""
    slurm: Optional[SlurmSettings] = None
    """The Slurm job's settings (`launcher: slurm`; unset: the defaults below)."""

    def named(self, option: str) -> str:
        return f"{WHERE}.{option}"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_in_flight", "timeout_s"):
            self.check_positive(name, "or remove it")
        self.check_positive("status_interval_s", "(seconds)", kind="number")
        self.status_interval_s = float(self.status_interval_s)
        self.env = {str(key): str(value) for key, value in (self.env or {}).items()}
        for name in self.env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ConfigError(
                    f"{WHERE}.env has {name!r}: not an environment variable name (letters, digits and _, not "
                    "starting with a digit); the script's `export` would fail at every launch."
                )
        if self.launcher == "slurm":
            self.slurm = self.slurm or SlurmSettings()
            if (
                not self.cpu
                and self.world_size > self.slurm.gpus_per_node
                and self.world_size % self.slurm.gpus_per_node
            ):
                raise ConfigError(
                    f"{WHERE}: tp x pp x dp = {self.world_size} processes do not fill whole nodes of "
                    f"slurm.gpus_per_node={self.slurm.gpus_per_node} GPUs: use a multiple of it, or at most that."
                )
        elif self.slurm is not None:
            raise ConfigError(
                f"{WHERE}.slurm is set but launcher is {self.launcher!r}: set launcher: slurm or remove it."
            )
        if self.launcher == "local":
            self._check_devices()

    def _check_devices(self) -> None:
        if self.cpu:
            if self.devices is not None:
                raise ConfigError(f"{WHERE}.devices is set with cpu: true: remove one of them.")
            return
        if self.devices is None:
            raise ConfigError(
                f"{WHERE}: a local evaluation on GPUs needs devices: the GPUs it may use besides training's "
                '(e.g. devices: "6,7"), or cpu: true for CPU processes.'
            )
        groups = len(self.device_list) // self.world_size
        if not self.device_list or len(self.device_list) % self.world_size:
            raise ConfigError(
                f"{WHERE}.devices {self.device_list} do not split into groups of tp x pp x dp = {self.world_size}: "
                "give a multiple of that many GPUs."
            )
        if self.max_in_flight > groups:
            raise ConfigError(
                f"{WHERE}.max_in_flight={self.max_in_flight} needs {self.max_in_flight * self.world_size} GPUs but "
                f"devices has {len(self.device_list)}: lower max_in_flight or add devices."
            )

    @property
    def device_list(self) -> List[str]:
        """`devices` as a list of GPU ids ([] when unset)."""
        if self.devices is None:
            return []
        items = self.devices.split(",") if isinstance(self.devices, str) else list(self.devices)
        return [str(item).strip() for item in items if str(item).strip()]
