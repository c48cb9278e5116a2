"""Check a training YAML before any process starts: one `ConfigError` naming the problem and the fix.

Nanotron reads its config with dacite, so a misspelled key surfaces as `UnexpectedDataError`
("can not match ... to any data class field") without saying in which section, and a layout that
does not match the number of processes as an `AssertionError` deep inside `ParallelContext`.
`check_training_config` reads the file itself first: unknown keys are named with their full path
and the closest known key, dacite's type errors and Nanotron's own assertions become a
`ConfigError`, and `tp x pp x dp x expert_parallel_size` is checked against the world size. A
config written for the other Nanotron (0.4's `data:` and `optimizer.adam_*`, or current Nanotron's
`data_stages:` and `optimizer.optimizer_factory`) is named as such, with the shipped config to start from.
"""

from typing import Any, Optional

import yaml

from lighteval_nanotron.errors import ConfigError, UnsupportedModelError
from lighteval_nanotron.hook.training_config import TrainingConfigWithEvaluation, check_known_keys, load_training_config
from lighteval_nanotron.nanotron_compat.variant import CONFIG_FOLDERS, installed_nanotron
from lighteval_nanotron.options.base import describe_type
from lighteval_nanotron.yaml_keys import UniqueKeyLoader

SCHEMA_KEYS = {
    "0.4": ("data:", "optimizer.adam_eps"),
    "main": ("data_stages:", "optimizer.optimizer_factory"),
}
"""Where the config schemas of Nanotron 0.4 and current Nanotron (GitHub main) differ."""


def check_training_config(path: str, world_size: Optional[int] = None) -> Any:
    """The loaded `TrainingConfigWithEvaluation` of `path`, or a `ConfigError` with the fix."""
    import dacite

    try:
        with open(path) as stream:
            content = yaml.load(stream, Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML ({_one_line(error)}): fix the syntax at that line.") from error
    if not isinstance(content, dict):
        raise ConfigError(f"{path} is not a YAML mapping of config sections: start from configs/tiny_cpu_train.yaml.")
    _check_schema(path, content)
    check_known_keys(path, content, TrainingConfigWithEvaluation)  # before Nanotron's own messages
    try:
        config = load_training_config(path)
    except (ConfigError, UnsupportedModelError) as error:  # ours, already with the fix (TypeError for models)
        raise type(error)(f"{path}: {error}") from error
    except dacite.WrongTypeError as error:
        raise ConfigError(f"{path}: {_wrong_type(error, content)}") from error
    except dacite.DaciteError as error:
        raise ConfigError(f"{path}: {_one_line(error)}: fix that value's type.") from error
    except (AssertionError, ValueError, TypeError, KeyError) as error:
        raise ConfigError(
            f"{path} is not a valid Nanotron config ({_one_line(error) or type(error).__name__}): fix that setting."
        ) from error
    if world_size is not None:
        _check_layout(path, config.parallelism, world_size)
    return config


def _schema_of(content: dict) -> Optional[str]:
    """The Nanotron whose schema `content` is written in: "0.4", "main", or None (neither, or both)."""
    optimizer = content.get("optimizer") if isinstance(content.get("optimizer"), dict) else {}
    v04 = "data" in content or "adam_eps" in optimizer
    main = "data_stages" in content or "optimizer_factory" in optimizer
    return "0.4" if v04 and not main else "main" if main and not v04 else None


def _check_schema(path: str, content: dict) -> None:
    installed, written = installed_nanotron().name, _schema_of(content)
    if written is None or installed not in CONFIG_FOLDERS or written == installed:
        return
    names = {"0.4": "Nanotron 0.4", "main": "current Nanotron (GitHub main)"}
    raise ConfigError(
        f"{path} is written for {names[written]} ({' and '.join(SCHEMA_KEYS[written])}) but the installed Nanotron is "
        f"{names[installed]}, which takes {' and '.join(SCHEMA_KEYS[installed])}: start from "
        f"{CONFIG_FOLDERS[installed] / 'tiny_cpu_train.yaml'} (docs/engine.md, 'Nanotron versions')."
    )


def _check_layout(path: str, parallelism: Any, world_size: int) -> None:
    tp, pp, dp = parallelism.tp, parallelism.pp, parallelism.dp
    ep = getattr(parallelism, "expert_parallel_size", 1) or 1
    needed = tp * pp * dp * ep
    if needed != world_size:
        layout = f"tp={tp} x pp={pp} x dp={dp}" + (f" x expert_parallel_size={ep}" if ep != 1 else "")
        raise ConfigError(
            f"{path}: parallelism {layout} needs {needed} processes but {world_size} are started: "
            f"start {needed} (--nproc {needed} / --nproc_per_node) or change parallelism.dp/tp/pp to multiply to "
            f"{world_size}."
        )


def _wrong_type(error: Any, content: dict) -> str:
    """`key.path is VALUE: give TYPE.` of a dacite type error, VALUE as the YAML wrote it (dacite may
    hold a half-converted one: a generator for a list given a string)."""
    value: Any = content
    for key in error.field_path.split("."):
        value = value.get(key) if isinstance(value, dict) else error.value
    return f"{error.field_path} is {value!r}: give {describe_type(error.field_type)}."


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
