"""Nanotron's own `lighteval:` training-config section (`LightEvalConfig`) mapped onto ours.

Nanotron 0.4 parses that section and then never uses it; current Nanotron's runner submits a Slurm
job per checkpoint (and is broken at its HEAD). Here it becomes a `lighteval_nanotron:` section,
through the table shared with `eval --lighteval-config-path` (`lighteval_compat.fields.FIELDS`), with a
log of what mapped and what has no effect:

- with Slurm settings (a `slurm_template`, or any `slurm.*`, `slurm_script_dir` or `logs_path`
  other than the defaults Nanotron's parser fills in), the hook's asynchronous mode with the Slurm
  launcher: a job per checkpoint at `parallelism` tp/pp/dp, every checkpoint or every
  `eval_interval` steps, `eval_interval_file` re-read at each save, as Nanotron's runner would;
- otherwise evaluation in the loop, at every checkpoint and at the end (or every `eval_interval`).

Both sections at once are refused: which one wins would be a guess.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.lighteval_compat.fields import (
    NANOTRON_SLURM_DEFAULTS,
    Consumer,
    MappedOptions,
    map_lighteval_options,
    nanotron_slurm_asked,
    with_source,
)
from lighteval_nanotron.options.hook import SECTION, EvaluationConfig
from lighteval_nanotron.options.launch import AsyncEvaluationConfig, SlurmSettings

MESH = "the hook evaluates on the training mesh, in the loop: Slurm settings would launch jobs at this layout"
HOOK = Consumer(
    name="the training hook",
    takes=frozenset(field.name for field in dataclasses.fields(EvaluationConfig)),
    no_use={"tp": MESH, "pp": MESH, "dp": MESH, "checkpoints_dir": "the hook evaluates the live model"},
)
WHERE = "Nanotron's lighteval: section"
LAYOUT = ("tp", "pp", "dp")
SITE_DEFAULTS = ("partition", "qos", "reservation", "cpus_per_task", "hf_cache")
"""Nanotron's defaults that name Hugging Face's own cluster (hopper-prod, qos low, reservation smollm,
88 CPUs): left to the cluster's own defaults unless the section sets another value."""


def evaluation_from_nanotron_section(section: Any) -> EvaluationConfig:
    """The hook's section equivalent to Nanotron's `lighteval:` section; logs what did not map."""
    mapped = map_lighteval_options(section, WHERE)
    if nanotron_slurm_asked(mapped.options.get("asynchronous")):
        _layout_into_the_jobs(mapped)
    else:
        if mapped.options.get("eval_interval_file") is not None:
            raise ConfigError(
                f"{WHERE}: eval_interval_file is read at each checkpoint by the Slurm runner: set the slurm fields "
                "(e.g. slurm.partition) to evaluate in Slurm jobs, or set eval_interval instead."
            )
        if mapped.options.pop("asynchronous", None) is not None:
            mapped.notes.append(
                f"{mapped.sources.pop('asynchronous')} (Nanotron's defaults only: the hook evaluates in the loop; "
                "set a slurm field such as slurm.partition to evaluate in Slurm jobs)"
            )
    options = HOOK.select(mapped, WHERE)
    if not options.get("tasks"):
        raise ConfigError(f"{WHERE}: tasks.tasks is empty: set it to task specs, e.g. 'lighteval|arc:easy|0'.")
    options["loggers"] = [*options["loggers"], "log"]
    at_checkpoints = options.get("eval_interval") is None
    if "asynchronous" in options:
        options["asynchronous"] = _slurm_jobs(options["asynchronous"])
    try:
        return EvaluationConfig(**options, eval_at_checkpoints=at_checkpoints, eval_at_end=True)
    except ConfigError as error:  # named as our section's key: say the field of Nanotron's it was written as
        written = {name: f"{WHERE}'s {mapped.sources[name]}" for name in options if name in mapped.sources}
        raise with_source(error, written, lambda name: f"{SECTION}.{name}") from error


def _layout_into_the_jobs(mapped: MappedOptions) -> None:
    """`parallelism` tp/pp/dp: the layout of the Slurm jobs (Nanotron's runner launched them so)."""
    jobs = mapped.options["asynchronous"]
    for name in LAYOUT:
        if name in mapped.options:
            jobs[name] = mapped.options.pop(name)
            mapped.sources["asynchronous"] += f", {mapped.sources.pop(name)}"


def _slurm_jobs(fields: dict[str, Any]) -> AsyncEvaluationConfig:
    """Nanotron's runner settings as the Slurm launcher's: one task per GPU here where Nanotron ran one
    torchrun per node, so its CPUs per node are shared among the node's tasks."""
    layout = {name: 1 if fields.get(name) is None else fields[name] for name in LAYOUT}
    for name, size in layout.items():
        if not isinstance(size, int) or size < 1:  # 0 is no layout, not 1
            raise ConfigError(
                f"{WHERE}: parallelism.{name} is {size!r}: it is the layout of the evaluation jobs; set a positive "
                "integer, or remove it for 1."
            )
    slurm = dict(fields.get("slurm") or {})
    for name in SITE_DEFAULTS:
        if slurm.get(name) == NANOTRON_SLURM_DEFAULTS[name]:
            slurm.pop(name)
    slurm.setdefault("gpus_per_node", NANOTRON_SLURM_DEFAULTS["gpus_per_node"])
    slurm.setdefault("time", NANOTRON_SLURM_DEFAULTS["time"])
    tasks_per_node = min(math.prod(layout.values()), slurm["gpus_per_node"])
    if slurm.get("cpus_per_task") is not None:
        slurm["cpus_per_task"] = max(1, int(slurm["cpus_per_task"]) // tasks_per_node)
    return AsyncEvaluationConfig(
        launcher="slurm",
        **layout,
        scripts_dir=fields.get("scripts_dir"),
        logs_dir=fields.get("logs_dir"),
        slurm=SlurmSettings(**slurm),
    )


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
