"""Atomic file writes: readers see the old file or the new one, never a half-written one; and a
check, before anything is evaluated, that a folder takes writes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from lighteval_nanotron.errors import TrackingError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)`, then move the temporary file onto `path` with `os.replace`.

    The temporary file is hidden (leading dot) and lives in the destination folder, so the final
    rename stays on one filesystem. On any failure it is removed and `path` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp_name)
    try:
        write(tmp_path)
        with open(tmp_path, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the user's usual mode
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


PROBE_BYTES = 1 << 16


def check_writable(folder: str | Path, what: str) -> None:
    """Create `folder` if needed and write, sync and remove a 64 KiB file in it; TrackingError naming
    the folder and the fix when that fails (no permission, a file in the way, a full disk)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".write-check.", dir=folder)
        try:
            with os.fdopen(os.dup(fd), "wb") as stream:  # writes every byte (or raises), unlike one os.write
                stream.write(bytes(PROBE_BYTES))
                stream.flush()
                os.fsync(stream.fileno())
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as error:
        raise TrackingError(
            f"The {what} {folder} cannot be written ({type(error).__name__}: {error}), so no result could be saved: "
            "choose a folder you can write to with free space, or free some."
        ) from error
