"""`eval --checkpoint-config-path <checkpoint>/config.yaml --lighteval-config-path eval.yaml`: the
counterpart of `lighteval nanotron`, through the table shared with the hook (`lighteval_compat.fields`).

The checkpoint config path names the checkpoint folder (its parent); the lighteval YAML's fields
become `CheckpointEvalConfig` options. A command-line flag may set what the YAML leaves unset;
setting one option both ways is refused (which one wins would be a guess).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.lighteval_compat.fields import LAUNCHER, Consumer, map_lighteval_options, with_source
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.options.flags import flag_name
from lighteval_nanotron.yaml_keys import UniqueKeyLoader

EVAL = Consumer(
    name="eval",
    takes=frozenset(field.name for field in dataclasses.fields(CheckpointEvalConfig)),
    no_use={
        "eval_interval": "eval evaluates the checkpoints it is given",
        "eval_interval_file": "eval evaluates the checkpoints it is given",
        "asynchronous": LAUNCHER,
    },
)


def checkpoint_folder(checkpoint_config_path: str) -> Path:
    """The checkpoint folder of `<checkpoint>/config.yaml` (a YAML file, as lighteval requires)."""
    path = Path(checkpoint_config_path)
    if path.suffix not in (".yaml", ".yml"):
        raise ConfigError(
            f"--checkpoint-config-path {checkpoint_config_path}: give the checkpoint's config.yaml, not {path.name!r}."
        )
    if not path.is_file():
        raise ConfigError(
            f"--checkpoint-config-path {checkpoint_config_path} does not exist: give the config.yaml inside a "
            "checkpoint folder (e.g. checkpoints/1000/config.yaml)."
        )
    return path.parent


def read_lighteval_config(path: str) -> Any:
    """lighteval's eval YAML as plain data."""
    try:
        content = yaml.load(Path(path).read_text(), Loader=UniqueKeyLoader)
    except OSError as error:
        raise ConfigError(f"--lighteval-config-path {path}: cannot read it ({error.strerror}).") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"--lighteval-config-path {path} is not valid YAML: {str(error).splitlines()[0]}.") from error
    if not isinstance(content, dict):
        raise ConfigError(
            f"--lighteval-config-path {path}: expected lighteval's eval YAML (a mapping), not {content!r}."
        )
    return content


def eval_config(
    flags: dict[str, Any], checkpoint_config_path: str | None = None, lighteval_config_path: str | None = None
) -> CheckpointEvalConfig:
    """`CheckpointEvalConfig` from the flags given (`{option: value}`, unset ones left out) and
    lighteval's two paths, each optional."""
    options: dict[str, Any] = {}
    written: dict[str, str] = {}  # option -> the lighteval field that set it, for its error
    if checkpoint_config_path is not None:
        if flags.get("checkpoint") is not None:
            raise ConfigError("Give a checkpoint folder or --checkpoint-config-path, not both.")
        options["checkpoint"] = str(checkpoint_folder(checkpoint_config_path))
    if lighteval_config_path is not None:
        where = f"lighteval config {lighteval_config_path}"
        mapped = map_lighteval_options(read_lighteval_config(lighteval_config_path), where)
        for name, value in EVAL.select(mapped, where).items():
            if name in flags and name not in mapped.defaulted:
                raise ConfigError(
                    f"{flag_name(CheckpointEvalConfig, name)} and {where}'s {mapped.sources[name]} "
                    f"both set {name}: keep one."
                )
            options[name] = value
            written[name] = f"{where}'s {mapped.sources[name]}"
    options.update(flags)
    if not options.get("tasks") and not options.get("held_out"):
        raise ConfigError(
            "No tasks: give --tasks (or tasks.tasks in the --lighteval-config-path YAML), or --held-out NAME=PATH."
        )
    try:
        return CheckpointEvalConfig(**options)
    except ConfigError as error:  # an option named by its flag that the YAML set: say where it was written
        from_yaml = {name: field for name, field in written.items() if name not in flags}
        raise with_source(error, from_yaml, lambda name: flag_name(CheckpointEvalConfig, name)) from error
