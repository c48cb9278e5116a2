"""lighteval's evaluation options mapped onto ours: one table for both places they are written.

Those places are lighteval's eval YAML (`lighteval nanotron --lighteval-config-path eval.yaml`,
lighteval 0.10's `LightEvalConfig`) and Nanotron's `lighteval:` training-config section
(Nanotron's `LightEvalConfig`, 0.4 and main). Every field of each is in `FIELDS`: it sets one of
our options, has no effect here (noted in the log), or is refused with the fix when its value
cannot be honoured. `map_lighteval_options(section)` gives our options; `eval` and the hook each
take the ones they have and say why they have no use for the others (`Consumer`).

No lighteval or Nanotron import: the section is read as plain data (a YAML mapping, or Nanotron's
parsed dataclasses turned into one).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options.base import describe_type, matches_type
from lighteval_nanotron.parallel.launch_env import world_rank

logger = logging.getLogger(__name__)

LAUNCHER = "evaluation runs in the job that was launched (torchrun/srun), see docs/eval.md"
HUB_ONLY = "only used to push to the Hub, which is refused"
ROUTINE = "no effect on what is computed"


@dataclass(frozen=True)
class Field:
    """What one lighteval field becomes here."""

    option: str | None = None
    """Our option it sets (a dotted name such as `loggers.details` is assembled afterwards)."""
    no_effect: str | None = None
    """Why it changes nothing here (noted in the log when set to anything but `default`)."""
    refuse: Callable[[Any], str | None] | None = None
    """The fix when its value cannot be honoured, None when it can."""
    default: Any = None
    """A value at which the field is silent (lighteval's or Nanotron's default)."""
    convert: Callable[[Any], Any] | None = None
    """The option's value from the field's (None: the field's value)."""
    kind: type | None = None
    """The type the value must have where it is read here rather than by the option it sets (a logger
    switch, a converted value): `"false"`, a truthy string, would turn details or W&B on."""


def _refuse_unless(allowed: Callable[[Any], bool], fix: str) -> Callable[[Any], str | None]:
    return lambda value: None if value is None or allowed(value) else fix


def _refuse_if_set(fix: str) -> Callable[[Any], str | None]:
    return lambda value: None if value is None else fix


def _false(value: Any) -> bool:
    return value is False


HUB_FIX = "results are written locally only: set it to false and upload <output_dir> yourself"


SAMPLERS = ("greedy", "top_k", "top_p", "basic")

NANOTRON_SLURM_DEFAULTS: dict[str, Any] = {
    "gpus_per_node": 8,
    "partition": "hopper-prod",
    "hf_cache": str(Path("~/.cache/huggingface").expanduser()),
    "cpus_per_task": 88,
    "qos": "low",
    "time": "24:00:00",
    "reservation": "smollm",
}
"""Current Nanotron's `LightEvalSlurm` defaults, which its parser fills in whether or not the YAML
sets them (`lighteval.slurm` is never empty there)."""
NANOTRON_SCRIPT_DIR = "eval_results/launch-config"
NANOTRON_LOGS_PATH = "eval_results/logs"

FIELDS: dict[str, Field] = {
    # Nanotron: its runner's Slurm job per checkpoint (the hook's asynchronous mode, Slurm launcher).
    "slurm_template": Field(option="asynchronous.slurm.template"),
    "slurm_script_dir": Field(option="asynchronous.scripts_dir"),
    **{f"slurm.{name}": Field(option=f"asynchronous.slurm.{name}") for name in NANOTRON_SLURM_DEFAULTS},
    "logs_path": Field(option="asynchronous.logs_dir"),
    "local_checkpoint_dir": Field(no_effect="checkpoints are read where they are", default="/scratch"),
    "s3_save_path": Field(no_effect="checkpoints are read from a folder; copy them from S3 first"),
    "nanotron_path": Field(
        no_effect="the evaluation runs `lighteval_nanotron eval`, not Nanotron's run_evals.py", default="./"
    ),
    "eval_config_override": Field(refuse=_refuse_if_set("write the override's fields in this section instead")),
    "eval_interval": Field(option="eval_interval"),
    "eval_interval_file": Field(option="eval_interval_file"),
    "checkpoints_path": Field(option="checkpoints_dir"),
    "output_dir": Field(option="output_dir"),
    "upload_to_wandb": Field(option="loggers.wandb", kind=bool),
    "wandb_project": Field(option="wandb_project"),
    "wandb_entity": Field(option="wandb_entity"),
    "batch_size": Field(
        no_effect="batches are sized by a token budget, tokens_per_batch; results do not depend on it", default=0
    ),
    # parallelism (Nanotron's ParallelismArgs)
    "parallelism.tp": Field(option="tp"),
    "parallelism.pp": Field(option="pp"),
    "parallelism.dp": Field(option="dp"),
    "parallelism.pp_engine": Field(no_effect="evaluation runs forwards only, with its own micro-batch schedule"),
    "parallelism.tp_mode": Field(
        no_effect="evaluation runs TP linears in all-reduce form whatever the mode", default="all_reduce"
    ),
    "parallelism.tp_linear_async_communication": Field(no_effect=ROUTINE, default=False),
    "parallelism.recompute_layer": Field(no_effect="evaluation has no backward pass", default=False),
    "parallelism.tp_recompute_allgather": Field(no_effect="evaluation has no backward pass", default=True),
    "parallelism.expert_parallel_size": Field(
        refuse=_refuse_unless(lambda value: value == 1, "expert parallelism is not supported: set it to 1"), default=1
    ),
    "parallelism.context_parallel_size": Field(
        refuse=_refuse_unless(lambda value: value == 1, "context parallelism is not supported: set it to 1"), default=1
    ),
    # generation (GenerationArgs): assembled by _generation below
    "generation.sampler": Field(option="generation.sampler"),
    "generation.temperature": Field(option="generation.temperature"),
    "generation.top_k": Field(option="generation.top_k"),
    "generation.top_p": Field(option="generation.top_p"),
    "generation.n_samples": Field(option="generation.num_samples"),
    "generation.seed": Field(option="generation.seed"),
    "generation.eos": Field(no_effect="generation stops at the tokenizer's end-of-sequence token and the task's stops"),
    "generation.use_cache": Field(no_effect="generation always decodes with a key/value cache", default=False),
    # tasks (LightEvalTasksArgs)
    "tasks.tasks": Field(option="tasks"),
    "tasks.custom_tasks": Field(option="custom_tasks"),
    "tasks.max_samples": Field(option="max_samples"),
    "tasks.num_fewshot_seeds": Field(
        refuse=_refuse_unless(
            lambda value: value in (0, 1), "only one few-shot draw per doc is supported (lighteval's nanotron uses 1)"
        ),
    ),
    "tasks.dataset_loading_processes": Field(no_effect="datasets are loaded once, on world rank 0", default=8),
    "tasks.multichoice_continuations_start_space": Field(option="multichoice_continuations_start_space"),
    "tasks.no_multichoice_continuations_start_space": Field(
        option="multichoice_continuations_start_space", convert=lambda value: False if value else None, kind=bool
    ),
    "tasks.pairwise_tokenization": Field(option="pairwise_tokenization"),
    # logging: lighteval 0.10 (LightEvalLoggingArgs) and Nanotron's names side by side
    "logging.output_dir": Field(option="output_dir"),
    "logging.local_output_path": Field(option="output_dir"),
    "logging.results_path_template": Field(
        refuse=_refuse_if_set(
            "results always go to <output_dir>/results/<model>/<step>/results_<date>.json: remove it "
            "(name the model with --model-name)"
        )
    ),
    "logging.save_details": Field(option="loggers.details", kind=bool),
    "logging.push_to_tensorboard": Field(option="loggers.tensorboard", kind=bool),
    "logging.push_results_to_tensorboard": Field(option="loggers.tensorboard", kind=bool),
    "logging.tensorboard_metric_prefix": Field(option="tensorboard_prefix"),
    "logging.push_to_hub": Field(refuse=_refuse_unless(_false, HUB_FIX)),
    "logging.push_results_to_hub": Field(refuse=_refuse_unless(_false, HUB_FIX)),
    "logging.push_details_to_hub": Field(refuse=_refuse_unless(_false, HUB_FIX)),
    "logging.public_run": Field(no_effect=HUB_ONLY, default=False),
    "logging.results_org": Field(no_effect=HUB_ONLY),
    "logging.hub_repo_results": Field(no_effect=HUB_ONLY),
    "logging.hub_repo_details": Field(no_effect=HUB_ONLY),
    "logging.hub_repo_tensorboard": Field(no_effect=HUB_ONLY),
    # Nanotron's wandb section (LightEvalWandbLoggerConfig)
    "wandb.wandb_project": Field(option="wandb_project"),
    "wandb.wandb_entity": Field(option="wandb_entity"),
    "wandb.wandb_run_name": Field(option="wandb_run_name"),
}
SECTIONS = {name.partition(".")[0] for name in FIELDS if "." in name}
GENERATION_FIELDS = {name.partition(".")[2] for name in FIELDS if name.startswith("generation.")}
NANOTRON_SAMPLER_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 0.9}
"""Nanotron's TopKSampler/TopPSampler defaults, used when the section leaves them unset."""
DEFAULT_GENERATION_SEED = 42
"""lighteval's and Nanotron's `GenerationArgs` seed when unset."""


@dataclass
class MappedOptions:
    """Our options from a lighteval section, with where each came from."""

    options: dict[str, Any]
    sources: dict[str, str]
    """`{option: the lighteval field(s) it came from}`."""
    notes: list[str]
    """`field (why)` of each field set here that has no effect."""
    defaulted: set[str] = dataclasses.field(default_factory=set)
    """Options set from lighteval's defaults, no field naming them (a command-line flag may override)."""


def plain(value: Any) -> Any:
    """A parsed config (dataclasses, pydantic models, enums, paths) as plain YAML-like data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return plain(value.model_dump())
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return type(value).__name__


def _flatten(section: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`{dotted field: value}`; an unknown field is refused (lighteval's own parser refuses it too)."""
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} is not a mapping of lighteval fields: see docs/eval.md for its layout.")
    flat: dict[str, Any] = {}
    for name, value in section.items():
        if name in FIELDS:
            flat[name] = value
        elif name in SECTIONS:
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {name} must be a mapping of fields, got {value!r}.")
            if name == "generation" and value and not set(value) & GENERATION_FIELDS:
                raise ConfigError(
                    f"{where}: generation per task ({', '.join(map(str, value))}) is not supported (lighteval's "
                    "nanotron refuses it too): give one generation section, or set generation_parameters in the task."
                )
            for key, item in value.items():
                dotted = f"{name}.{key}"
                if dotted not in FIELDS:
                    raise ConfigError(f"{where}: unknown field {dotted}: {_closest_field(dotted)}")
                flat[dotted] = item
        else:
            raise ConfigError(f"{where}: unknown field {name}: {_closest_field(name)}")
    return flat


def _closest_field(name: str) -> str:
    """The fix of an unknown field: the closest known one of its section (a typo), else where the fields are listed."""
    section, dot, key = name.rpartition(".")
    known = [field.rpartition(".")[2] for field in FIELDS if field.rpartition(".")[0] == section]
    close = difflib.get_close_matches(key, known + ([] if dot else list(SECTIONS)), n=1)
    return f"did you mean {section}{dot}{close[0]}?" if close else "remove it (known: see docs/eval.md)."


def map_lighteval_options(section: Any, where: str = "the lighteval config") -> MappedOptions:
    """Our options for a lighteval section (a mapping, or Nanotron's parsed `LightEvalConfig`).
    Raises `ConfigError` naming the first field that cannot be honoured, and the fix."""
    flat = _flatten(plain(section), where)
    options: dict[str, Any] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for name, value in flat.items():
        rule = FIELDS[name]
        if rule.kind is not None and value is not None and not matches_type(value, rule.kind):
            raise ConfigError(f"{where}: {name} is {value!r}: give {describe_type(rule.kind)}.")
        fix = rule.refuse(value) if rule.refuse is not None else None
        if fix is not None:
            raise ConfigError(f"{where}: {name}={value!r} cannot be honoured: {fix}.")
        if rule.option is not None and rule.convert is not None and value is not None:
            value = rule.convert(value)
        if rule.option is None or value is None:
            if rule.no_effect is not None and value is not None and not _is_default(value, rule.default):
                notes.append(f"{name} ({rule.no_effect})")
            continue
        if rule.option in options and options[rule.option] != value:
            raise ConfigError(
                f"{where}: {sources[rule.option]}={options[rule.option]!r} and {name}={value!r} both set "
                f"{rule.option}: keep one."
            )
        options[rule.option] = value
        sources[rule.option] = name if rule.option not in sources else f"{sources[rule.option]}, {name}"
    defaulted = _assemble_loggers(options, sources, notes)
    _assemble_generation(options, sources, notes, where)
    _assemble_asynchronous(options, sources)
    return MappedOptions(options, sources, notes, defaulted)


def with_source(error: ConfigError, written: dict[str, str], named: Callable[[str], str]) -> ConfigError:
    """`error` of an option, with the lighteval field its value was written as (`written`: option ->
    `where's field`) when its message names one of those options (`named(option)`, how the way in
    names it: `--max-samples`, `lighteval_nanotron.max_samples`); else `error` itself."""
    message = str(error)
    source = next((field for option, field in written.items() if message.startswith(f"{named(option)} ")), None)
    return ConfigError(f"{message.rstrip('.')} (set by {source}).") if source else error


def _assemble_asynchronous(options: dict[str, Any], sources: dict[str, str]) -> None:
    """`asynchronous.*` (Nanotron's Slurm runner settings) -> one `asynchronous` mapping, the
    hook's `asynchronous:` keys (its parser's defaults included: `nanotron_slurm_asked` tells them apart)."""
    dotted = sorted(key for key in options if key.startswith("asynchronous."))
    if not dotted:
        return
    nested: dict[str, Any] = {}
    for key in dotted:
        *parents, leaf = key.split(".")[1:]
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = options.pop(key)
    options["asynchronous"] = nested
    sources["asynchronous"] = ", ".join(sources.pop(key) for key in dotted)


def nanotron_slurm_asked(asynchronous: dict[str, Any] | None) -> bool:
    """Whether Nanotron's section asks for Slurm jobs (the mapped `asynchronous` option): a
    template, or any Slurm setting (script and log folders included) other than the defaults
    Nanotron's parser fills in."""
    asynchronous = asynchronous or {}
    slurm = asynchronous.get("slurm") or {}
    return bool(
        slurm.get("template")
        or any(value != NANOTRON_SLURM_DEFAULTS[name] for name, value in slurm.items() if name != "template")
        or asynchronous.get("scripts_dir") not in (None, NANOTRON_SCRIPT_DIR)
        or asynchronous.get("logs_dir") not in (None, NANOTRON_LOGS_PATH)
    )


def _is_default(value: Any, default: Any) -> bool:
    if isinstance(value, str) and isinstance(default, str):
        return value.lower() == default.lower()
    return value == default


def _assemble_loggers(options: dict[str, Any], sources: dict[str, str], notes: list[str]) -> set[str]:
    """`loggers.*` switches -> one `loggers` list (lighteval's defaults: details on, the others off).
    Returns {"loggers"} when no field named a logger (the list is lighteval's default)."""
    switches = {name: options.pop(f"loggers.{name}", None) for name in ("details", "tensorboard", "wandb")}
    field_names = [sources.pop(f"loggers.{name}") for name in switches if f"loggers.{name}" in sources]
    if switches["wandb"] is None and options.get("wandb_project"):
        switches["wandb"] = True
        field_names.append(sources["wandb_project"])
    if switches["tensorboard"]:
        notes.append("TensorBoard events are written under <output_dir>/tensorboard, not pushed to the Hub")
    defaults = {"details": True, "tensorboard": False, "wandb": False}
    options["loggers"] = ["json"] + [name for name, on in switches.items() if (defaults[name] if on is None else on)]
    sources["loggers"] = ", ".join(field_names) or "lighteval's defaults (details on, tensorboard off)"
    return set() if field_names else {"loggers"}


def _assemble_generation(options: dict[str, Any], sources: dict[str, str], notes: list[str], where: str) -> None:
    """Nanotron's sampler and its settings -> our `generation` (temperature, top_k, top_p,
    num_samples, seed): what Nanotron's decoder would sample with, or a refusal where it differs."""
    values = {key.partition(".")[2]: options.pop(key) for key in list(options) if key.startswith("generation.")}
    for key in list(sources):
        if key.startswith("generation."):
            sources.pop(key)
    sampler = values.pop("sampler", None)
    if sampler is not None and str(sampler).lower() not in SAMPLERS:
        raise ConfigError(f"{where}: generation.sampler={sampler!r} is not a sampler: use one of {list(SAMPLERS)}.")
    sampler = None if sampler is None else str(sampler).lower()
    if sampler in (None, "greedy"):
        set_fields = [f"generation.{key}" for key in values]
        if sampler is None and set(values) & {"temperature", "top_k", "top_p"}:
            raise ConfigError(
                f"{where}: {', '.join(set_fields)} set without generation.sampler: set sampler to top_k, top_p "
                "or basic to sample with them, or to greedy."
            )
        if values.get("num_samples") not in (None, 1):
            raise ConfigError(
                f"{where}: generation.n_samples={values['num_samples']} with greedy generation gives the same "
                "sample each time: set generation.sampler to top_k, top_p or basic, or n_samples to 1."
            )
        notes.extend(f"{name} (greedy generation)" for name in set_fields)
        return
    if sampler == "basic":
        ignored = [key for key in ("temperature", "top_k", "top_p") if values.get(key) is not None]
        if ignored:
            raise ConfigError(
                f"{where}: generation.{ignored[0]} with sampler basic: Nanotron's basic sampler ignores it "
                "(it samples from the full distribution at temperature 1): use sampler top_k or top_p, or remove it."
            )
        generation = {"temperature": 1.0}
    else:
        own = "top_k" if sampler == "top_k" else "top_p"
        other = "top_p" if sampler == "top_k" else "top_k"
        if values.get(other) is not None:
            raise ConfigError(
                f"{where}: generation.{other} with sampler {sampler}: Nanotron's {sampler} sampler ignores it: "
                f"remove it, or use sampler {other}."
            )
        generation = {}
        for key in ("temperature", own):
            if values.get(key) is None:
                notes.append(f"generation.{key} unset: {NANOTRON_SAMPLER_DEFAULTS[key]} (Nanotron's sampler default)")
            generation[key] = NANOTRON_SAMPLER_DEFAULTS[key] if values.get(key) is None else values[key]
    generation["seed"] = DEFAULT_GENERATION_SEED if values.get("seed") is None else values["seed"]
    if values.get("num_samples") is not None:
        generation["num_samples"] = values["num_samples"]
    options["generation"] = generation
    sources["generation"] = f"generation.sampler={sampler}"


@dataclass(frozen=True)
class Consumer:
    """One way in (`eval`, the hook): the options it takes, and why it has no use for the others."""

    name: str
    takes: frozenset[str]
    no_use: Mapping[str, str]

    def select(self, mapped: MappedOptions, where: str) -> dict[str, Any]:
        """The options this consumer takes; the others are noted with its reason. Logs one line
        of what was mapped and what has no effect (on world rank 0: every rank reads the config)."""
        taken: dict[str, Any] = {}
        notes = list(mapped.notes)
        for option, value in mapped.options.items():
            if option in self.takes:
                taken[option] = value
            elif option in self.no_use:
                notes.append(f"{mapped.sources[option]} ({self.no_use[option]})")
            else:
                raise ConfigError(f"{where}: {mapped.sources[option]} has no equivalent in {self.name}: remove it.")
        if world_rank() != 0:
            return taken
        logger.warning(
            "%s for %s. Mapped: %s. No effect here: %s.",
            where,
            self.name,
            ", ".join(f"{mapped.sources[key]} -> {key}={value!r}" for key, value in taken.items()) or "nothing",
            "; ".join(notes) or "none",
        )
        return taken


OPTIONS = frozenset(
    {
        rule.option
        for rule in FIELDS.values()
        if rule.option and not rule.option.startswith(("loggers.", "generation.", "asynchronous."))
    }
    | {"loggers", "generation", "asynchronous"}
)
"""Every option the table can produce; each consumer takes or explains each one."""
