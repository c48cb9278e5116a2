"""Which checkpoints of a live training folder are ready to evaluate, and when the training is done.

A checkpoint is ready when it is complete by the integrity rule (`model/` and
`checkpoint_metadata.json`, see `discovery`) **and** its files have stopped changing: the same
names, sizes and modification times for `settle_s` seconds. Nanotron's world rank 0 writes the
metadata before the other ranks have necessarily finished their weight shards (the barrier comes
after it), and a copy tool may write the metadata first, so completeness alone can name a
half-written folder; a folder whose files still change is never ready.

The training's last checkpoint is the one at its final step, read from the newest checkpoint's
`config.yaml`: `tokens.train_steps` when Nanotron saves the final state (current Nanotron's
`checkpoints.save_final_state`, or `train_steps` a multiple of `checkpoint_interval`), else the
last multiple of `checkpoint_interval` below it.

A scan reads no checkpoint's metadata: a checkpoint that cannot be read is the watch's to record
and skip (`watch`), not a reason to stop looking. The checkpoints folder itself may not exist yet
(Nanotron creates it at its first save): the watch waits for it; once seen, its removal is an error.

Pure file reads and no torch: one rank scans and broadcasts what it found (`watch`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lighteval_nanotron.checkpoint_eval.discovery import CheckpointInfo, step_folders
from lighteval_nanotron.checkpoints.format import is_complete_checkpoint, read_training_config
from lighteval_nanotron.checkpoints.path_hints import checkpoint_path_hint
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.steps import numbered_folders

Fingerprint = tuple[tuple[str, int, int], ...]


def fingerprint(folder: Path) -> Fingerprint:
    """(relative path, size, modification time in ns) of every file below `folder`, sorted."""
    entries = []
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent) / name
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed while listed (a temporary file renamed into place)
                continue
            entries.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(entries))


def last_saved_step(checkpoint: Path) -> int | None:
    """The step of the training's last checkpoint according to `checkpoint`'s config.yaml (None
    when it has no training config, e.g. a converted model)."""
    try:
        config = read_training_config(checkpoint)
    except CheckpointError:
        return None
    tokens = config.get("tokens") if isinstance(config.get("tokens"), dict) else {}
    saving = config.get("checkpoints") if isinstance(config.get("checkpoints"), dict) else {}
    train_steps, interval = tokens.get("train_steps"), saving.get("checkpoint_interval")
    if not isinstance(train_steps, int) or train_steps < 1:
        return None
    if saving.get("save_final_state") or not isinstance(interval, int) or interval < 1:
        return train_steps
    return train_steps - train_steps % interval or None


@dataclass
class ArrivalScanner:
    """Remembers each step folder's files between scans to tell a settled checkpoint from one being written."""

    root: Path
    settle_s: float
    _seen: dict[int, tuple[Fingerprint, float]] = field(default_factory=dict)
    _root_seen: bool = False

    def scan(self, now: float, handled: set[int]) -> Scan:
        """The complete, settled checkpoints not in `handled` (step order, their metadata unread),
        the steps still being written, and the training's last step according to the newest complete
        checkpoint. A checkpoints folder not created yet holds nothing; one removed since is a
        CheckpointError."""
        if not self.root.is_dir():
            if self._root_seen:
                raise CheckpointError(
                    f"Checkpoints folder {self.root} was removed while watched: the results written so far are "
                    "kept; restart the watch on the folder's new place (steps with results are skipped)."
                )
            if self.root.exists():
                raise CheckpointError(f"{self.root} is a file, not a folder: pass the trainer's checkpoints_path.")
            return Scan([], [], None, root_exists=False)
        if not self._root_seen:
            _check_checkpoints_folder(self.root)
            self._root_seen = True
        folders = step_folders(self.root)
        ready: list[CheckpointInfo] = []
        writing: list[int] = []
        newest_complete: Path | None = None
        for step, folder in folders:
            if not is_complete_checkpoint(folder):
                writing.append(step)
                continue
            newest_complete = folder
            if step in handled:
                self._seen.pop(step, None)
                continue
            if not self._settled(step, folder, now):
                writing.append(step)
                continue
            ready.append(CheckpointInfo(folder, step))
        last = last_saved_step(newest_complete) if newest_complete is not None else None
        return Scan(ready, writing, last)

    def _settled(self, step: int, folder: Path, now: float) -> bool:
        current = fingerprint(folder)
        previous = self._seen.get(step)
        if previous is None or previous[0] != current:
            self._seen[step] = (current, now)
            return self.settle_s == 0
        return now - previous[1] >= self.settle_s


def _check_checkpoints_folder(root: Path) -> None:
    """A folder that can never hold step folders is a CheckpointError: one checkpoint, or a Hugging
    Face model folder, would be watched for ever."""
    if is_complete_checkpoint(root):
        raise CheckpointError(
            f"{root} is one checkpoint, not a training's folder of step folders: watch the folder that holds the "
            f"steps (the trainer's checkpoints_path), or evaluate it once (`lighteval-nanotron eval {root} ...`)."
        )
    hint = checkpoint_path_hint(root)
    if hint and not numbered_folders(root):
        raise CheckpointError(hint)


@dataclass(frozen=True)
class Scan:
    """What one look at the checkpoints folder found."""

    ready: list[CheckpointInfo]
    """Complete checkpoints whose files have not changed for the settle time, not handled yet (path
    and folder step only: `discovery.checkpoint_info` reads the rest)."""
    writing: list[int]
    """Steps whose folders are incomplete or still changing."""
    last_step: int | None
    """The training's last checkpoint step (None: not known from the checkpoints' config)."""
    root_exists: bool = True
    """False while the checkpoints folder is not created yet."""
