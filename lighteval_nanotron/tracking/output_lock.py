"""One writer at a time per output folder: the read-merge-replace of a step's results file, and the
choice of the step's date id that results and details share, happen under an exclusive lock.

Two evaluations writing to one folder (two backfills with different tasks, the training hook and a
backfill) would otherwise both read a step's results file, merge their own tasks in and replace it,
and the later replace would drop the earlier one's tasks; or both would find no file and start the
step under two date ids. The lock is an OS lock on `<output_dir>/.lighteval_nanotron.lock`
(`filelock`: `flock`, released by the kernel when a process dies, so a crash leaves no stale lock).
A wait longer than `LOCK_TIMEOUT_S` is a TrackingError naming the lock file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from lighteval_nanotron.errors import TrackingError

LOCK_NAME = ".lighteval_nanotron.lock"
LOCK_TIMEOUT_S = 120.0
"""Writers hold the lock while they write one step's files (seconds at most); a longer wait means a
writer is stuck."""


@contextlib.contextmanager
def output_lock(output_dir: str | Path, timeout_s: float | None = None) -> Iterator[Path]:
    """Hold the output folder's write lock for the block (created with the folder if missing);
    wait at most `timeout_s` (None: `LOCK_TIMEOUT_S`)."""
    from filelock import FileLock, Timeout

    timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    path = Path(output_dir) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=timeout_s)
    try:
        lock.acquire()
    except Timeout:
        raise TrackingError(
            f"Another process has held the write lock of {output_dir} ({path}) for more than {timeout_s:.0f}s: an "
            "evaluation writing results there is stuck. Stop it, or write to another output folder."
        ) from None
    try:
        yield path
    finally:
        lock.release()
