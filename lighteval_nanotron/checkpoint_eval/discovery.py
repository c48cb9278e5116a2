"""Which checkpoints to evaluate: one folder, or every step folder of a training run, in step order.

Nanotron's trainer writes `<checkpoints_path>/<step>/` with `checkpoint_metadata.json` last, so a
numbered folder without it is still being written (or was abandoned) and is left out. Pure file
reads: every rank computes the same list from the same files.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lighteval_nanotron.checkpoints.format import (
    CONVERTED_STAGE,
    METADATA_FILE,
    TRAINING_CONFIG_FILE,
    WEIGHTS_FOLDER,
    check_complete_checkpoint,
    is_complete_checkpoint,
    training_config_section,
)
from lighteval_nanotron.checkpoints.path_hints import checkpoint_path_hint
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.setup.finished_steps import Done, is_done
from lighteval_nanotron.setup.naming import model_name
from lighteval_nanotron.steps import numbered_folders, step_number

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint folder and what it says about its place in training."""

    path: Path
    step: int | None
    """The training step (`last_train_step` of its metadata, else a numeric folder name; the two
    must agree when both are there); None for a checkpoint that does not come from training (e.g.
    a converted model)."""
    consumed_tokens: int | None = None
    """Training tokens seen (`consumed_train_samples` x `tokens.sequence_length`), when recorded."""
    consumed_train_samples: int | None = None
    """Training samples seen (the checkpoint metadata's `consumed_train_samples`), when recorded."""


def _read_metas(path: Path) -> dict[str, Any]:
    file = path / METADATA_FILE
    try:
        metadata = json.loads(file.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as error:
        raise CheckpointError(
            f"Cannot read {file}: {error}. The checkpoint is incomplete or corrupt; re-save it or remove the folder."
        ) from error
    metas = metadata.get("metas") if isinstance(metadata, dict) else None
    return metas if isinstance(metas, dict) else {}


def _not_from_training(metas: dict[str, Any]) -> bool:
    """Metadata written for weights that no training produced (converted, or random test weights):
    under current Nanotron step 0 of the one stage `CONVERTED_STAGE`, which is no training step."""
    stages = metas.get("data_stages")
    names = [stage.get("name") for stage in stages if isinstance(stage, dict)] if isinstance(stages, list) else []
    return metas.get("last_train_step") == 0 and names == [CONVERTED_STAGE]


def checkpoint_info(path: str | Path) -> CheckpointInfo:
    """Describe one checkpoint folder; raises CheckpointError naming what is missing."""
    path = Path(path)
    check_complete_checkpoint(path)
    metas = _read_metas(path)
    if _not_from_training(metas):
        metas = {}
    step = _integer(metas.get("last_train_step"), f"{path / METADATA_FILE}'s last_train_step")
    named = step_number(path.name)
    if step is not None and named is not None and named != step:
        raise CheckpointError(
            f"Checkpoint folder {path} is named step {named} but its {METADATA_FILE} says step {step} (Nanotron "
            "names a checkpoint by its step: a copy under another step's name?): a backfill would file it as step "
            f"{named}, `eval {path}` as step {step}. Move it to the folder of its step, or remove it."
        )
    if step is None:
        step = named
    samples = _integer(metas.get("consumed_train_samples"), f"{path / METADATA_FILE}'s consumed_train_samples")
    sequence_length = _integer(
        training_config_section(path, "tokens").get("sequence_length"),
        f"{path / TRAINING_CONFIG_FILE}'s tokens.sequence_length",
    )
    tokens = samples * sequence_length if samples is not None and sequence_length else None
    return CheckpointInfo(path, step, tokens, samples)


def _integer(value: Any, what: str) -> int | None:
    """A recorded count, an int >= 0 as written (None stays None); CheckpointError naming the file for
    anything else: `int()` would file a step of `true` as step 1, `10.5` and `"10"` as step 10."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CheckpointError(
            f"{what} is {value!r}, not an integer >= 0: the checkpoint's files are damaged; re-save or re-copy them."
        )
    return value


def step_folders(root: Path) -> list[tuple[int, Path]]:
    """`(step, folder)` of every numbered folder of `root`, in step order. Two folders naming one step
    (`10/` and `010/`) are a CheckpointError: both would be evaluated as that step, the second
    replacing the first's results."""
    numbered = numbered_folders(root)
    for (step, first), (next_step, second) in zip(numbered, numbered[1:]):
        if step == next_step:
            raise CheckpointError(
                f"Checkpoint folders {first} and {second} both name step {step}: their results would be filed as "
                "one step, one replacing the other. Rename or move one of them out of the checkpoints folder."
            )
    return numbered


def find_checkpoints(checkpoints_dir: str | Path) -> list[CheckpointInfo]:
    """Every complete numbered step folder of a training output folder, in step order."""
    root = Path(checkpoints_dir)
    if not root.is_dir():
        hint = checkpoint_path_hint(root)
        raise CheckpointError(hint or f"Checkpoints folder {root} does not exist: pass the trainer's checkpoints_path.")
    found = []
    for step, folder in step_folders(root):
        if not is_complete_checkpoint(folder):
            logger.warning(
                "Skipping %s: no %s/ or %s yet (incomplete checkpoint)", folder, WEIGHTS_FOLDER, METADATA_FILE
            )
            continue
        info = checkpoint_info(folder)
        found.append(CheckpointInfo(folder, step, info.consumed_tokens, info.consumed_train_samples))
    if not found and is_complete_checkpoint(root):
        raise CheckpointError(
            f"{root} is one checkpoint, not a folder of step folders: pass it without --checkpoints-dir "
            f"(`lighteval-nanotron eval {root} ...`)."
        )
    if not found:
        raise CheckpointError(
            f"No checkpoint in {root}: expected numbered step folders (e.g. {root}/1000/) holding "
            f"{WEIGHTS_FOLDER}/ and {METADATA_FILE}."
        )
    return found


def pending_tasks(
    checkpoints: list[CheckpointInfo],
    task_names: list[str],
    done: Done,
    max_samples: int | None,
    digests: Mapping[str, str],
) -> dict[int | None, list[str]]:
    """`{step: tasks still to evaluate}` for the checkpoints with anything left: a step is done
    per (task with its few-shot count, max_samples), a held-out domain on the windows whose digest
    `digests` gives (`setup.finished_steps.is_done`); a checkpoint without a step always is pending."""
    todo: dict[int | None, list[str]] = {}
    for info in checkpoints:
        evaluated = done.get(info.step, {}) if info.step is not None else {}
        missing = [name for name in task_names if not is_done(evaluated, name, max_samples, digests)]
        if missing:
            todo[info.step] = missing
    return todo


def default_model_name(path: str | Path) -> str:
    """The name the training hook gives this run's results, so both write to the same place
    (`setup.naming.model_name`): config.yaml's `lighteval_nanotron.model_name`, else
    `general.project/general.run`; a folder without a training config is named after itself."""
    general = training_config_section(path, "general")
    option, project, run = (
        _name(training_config_section(path, "lighteval_nanotron"), "lighteval_nanotron.model_name", path),
        _name(general, "general.project", path),
        _name(general, "general.run", path),
    )
    return model_name(option, project, run, fallback=Path(path).resolve().name)


def _name(section: dict[str, Any], key: str, path: str | Path) -> str | None:
    """A name of the training config (it becomes a results folder): a string or unset; CheckpointError
    naming the file and key for anything else (a list would be filed under a folder named `['a']`)."""
    value = section.get(key.rpartition(".")[2])
    if value is not None and not isinstance(value, str):
        raise CheckpointError(
            f"{Path(path) / TRAINING_CONFIG_FILE}'s {key} is {value!r}, not a name: fix it, or name the run with "
            "--model-name."
        )
    return value
