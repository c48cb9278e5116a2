"""Training steps in folder names: Nanotron names a checkpoint `<step>/`, lighteval's results layout
a results folder `<step>/`, in ASCII digits."""

from __future__ import annotations

from pathlib import Path


def step_number(name: str) -> int | None:
    """The step a folder name states (`"10"`, `"010"`: 10), None for any other name. `str.isdigit`
    alone also accepts digits `int` cannot read (`"²"`)."""
    return int(name) if name.isascii() and name.isdigit() else None


def numbered_folders(root: Path) -> list[tuple[int, Path]]:
    """`(step, folder)` of every folder of `root` named by a step, in step order ([] when `root` is
    not a folder)."""
    if not root.is_dir():
        return []
    return sorted((step, p) for p in root.iterdir() if p.is_dir() and (step := step_number(p.name)) is not None)
