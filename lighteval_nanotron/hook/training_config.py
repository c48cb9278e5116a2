"""Nanotron's `Config` with one more optional section, `lighteval_nanotron:`, read from the same YAML.

Pass `TrainingConfigWithEvaluation` as `config_class` to `DistributedTrainer` (Nanotron's own way
of adding config sections); `EvaluatingTrainer` does it for you.
"""

import dataclasses
import difflib
import logging
import typing
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.lighteval_compat.nanotron_section import merge_sections
from lighteval_nanotron.models.families import refuse_untrainable_config
from lighteval_nanotron.nanotron_compat.imports import import_nanotron
from lighteval_nanotron.options.hook import SECTION, EvaluationConfig
from lighteval_nanotron.yaml_keys import UniqueKeyLoader

import_nanotron()

from nanotron.config import Config, get_config_from_file  # noqa: E402

logger = logging.getLogger(__name__)


@dataclass
class TrainingConfigWithEvaluation(Config):
    """A Nanotron training config plus the evaluation section (absent: training without evaluation)."""

    lighteval_nanotron: Optional[EvaluationConfig] = None

    def __post_init__(self) -> None:
        if self.model is not None:
            refuse_untrainable_config(self.model.model_config)  # before Nanotron's own checks trip on it
        super().__post_init__()
        self.lighteval_nanotron = merge_sections(self.lighteval, self.lighteval_nanotron)
        self.lighteval = None
        if self.lighteval_nanotron is not None and self.tokens is not None:
            interval = self.checkpoints.checkpoint_interval if self.checkpoints is not None else None
            self.lighteval_nanotron.check_against_training(self.tokens.train_steps, interval)


def load_training_config(path: str) -> TrainingConfigWithEvaluation:
    """Read a training YAML with an optional `lighteval_nanotron:` section (raises `ConfigError` on a bad one,
    on a key written twice, of which Nanotron's reader would keep the last, and on an unknown key)."""
    try:
        with open(path) as stream:
            content = yaml.load(stream, Loader=UniqueKeyLoader)
    except yaml.constructor.ConstructorError as error:
        raise ConfigError(f"{path}: {' '.join(str(error).split())}.") from error
    if isinstance(content, dict):  # a typo named with the closest key (dacite names neither section nor fix)
        check_known_keys(path, content, TrainingConfigWithEvaluation)
        if SECTION in content and content[SECTION] is None:  # keys all commented out; saved configs of runs
            # without evaluation hold it too, so it is said, not refused
            logger.warning("%s: the %s: section is empty: this run trains without evaluation.", path, SECTION)
    return get_config_from_file(path, config_class=TrainingConfigWithEvaluation)


def check_known_keys(path: str, content: dict, cls: type) -> None:
    """ConfigError naming the first key of `content` that no field of dataclass `cls` (or of the
    dataclasses it nests) matches, with its full path and the closest known key (an option's
    former name: its new one, from its `renamed_from` metadata)."""
    for key_path, known in _unknown_keys(content, cls):
        name = key_path.rsplit(".", 1)[-1]
        renamed = [field.name for field in known if field.metadata.get("renamed_from") == name]
        if renamed:
            raise ConfigError(f"{path}: unknown key {key_path!r}: it is renamed {renamed[0]!r}; write that.")
        names = [field.name for field in known]
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys there: {', '.join(sorted(names))}."
        raise ConfigError(f"{path}: unknown key {key_path!r}: {hint}")


def _unknown_keys(content: dict, cls: type, prefix: str = "") -> Iterator[tuple[str, list[dataclasses.Field]]]:
    """(dotted key path, the dataclass fields at that level) of every key no dataclass field matches."""
    hints = typing.get_type_hints(cls)
    fields = {field.name: hints.get(field.name) for field in dataclasses.fields(cls)}
    for key, value in content.items():
        key_path = f"{prefix}{key}"
        if key not in fields:
            yield key_path, list(dataclasses.fields(cls))
            continue
        nested = _dataclass_of(fields[key])
        if nested is not None and isinstance(value, dict):
            yield from _unknown_keys(value, nested, key_path + ".")


def _dataclass_of(hint: Any) -> Optional[type]:
    """The one dataclass a field's type names (through Optional), else None (unions stay unchecked)."""
    if dataclasses.is_dataclass(hint):
        return hint
    candidates = [arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)]
    return candidates[0] if len(candidates) == 1 else None
