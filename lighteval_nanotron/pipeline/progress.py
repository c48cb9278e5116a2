"""A progress bar for one evaluation: docs done, docs/s and ETA, on the one process that shows it.

The caller decides who shows it (world rank 0) and whether at all (a config switch); tqdm itself
stays quiet when stderr is not a terminal, so logs and CI output get no bar lines.
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm


def evaluation_progress(total_docs: int, step: int | None, enabled: bool) -> Any:
    """A tqdm bar over `total_docs` docs (a disabled one when `enabled` is false or off a terminal)."""
    label = "evaluation" if step is None else f"evaluation at step {step}"
    return tqdm(
        total=total_docs,
        desc=label,
        unit="doc",
        leave=False,
        dynamic_ncols=True,
        disable=None if enabled else True,  # None: tqdm disables itself when stderr is not a TTY
    )
