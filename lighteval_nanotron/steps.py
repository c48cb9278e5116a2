"""Training steps in folder names: Nanotron names a checkpoint `<step>/`, lighteval's results layout
a results folder `<step>/`, in ASCII digits."""

from __future__ import annotations


def step_number(name: str) -> int | None:
    """The step a folder name states (`"10"`, `"010"`: 10), None for any other name. `str.isdigit`
    alone also accepts digits `int` cannot read (`"²"`)."""
    return int(name) if name.isascii() and name.isdigit() else None
