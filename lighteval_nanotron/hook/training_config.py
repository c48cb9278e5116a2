"""Nanotron's `Config` with one more optional section, `lighteval_nanotron:`, read from the same YAML.

Pass `TrainingConfigWithEvaluation` as `config_class` to `DistributedTrainer` (Nanotron's own way
of adding config sections); `EvaluatingTrainer` does it for you.
"""

import logging
from dataclasses import dataclass
from typing import Optional

import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.config import SECTION, EvaluationConfig
from lighteval_nanotron.hook.config_check import check_known_keys
from lighteval_nanotron.hook.nanotron_lighteval_section import merge_sections
from lighteval_nanotron.models.families import refuse_untrainable_config
from lighteval_nanotron.nanotron_compat.imports import import_nanotron
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
