"""The progress of one evaluation: docs done of the total, docs/s and the time left, on the one
process that reports it (the reporting rank), advanced as each micro-batch ends.

Two outputs, each optional: a tqdm bar on a terminal (it stays on screen when the evaluation ends;
tqdm draws nothing when stderr is not a terminal), and lines to a log function at most every
`log_interval_s` seconds (the hook's log, `eval` off a terminal), so that a long evaluation shows
it is alive in a log file too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm import tqdm

ProgressLog = Callable[[str], None]
format_interval = tqdm.format_interval  # seconds as [H:]MM:SS


class EvaluationProgress:
    """Docs done of `total_docs` for one evaluation; `advance_to(docs)` as work ends."""

    def __init__(
        self,
        total_docs: int,
        step: int | None,
        show_bar: bool,
        log: ProgressLog | None = None,
        log_interval_s: float = 30.0,
    ) -> None:
        self.label = "evaluation" if step is None else f"evaluation at step {step}"
        self.total = total_docs
        self.done = 0.0
        self.log = log
        self.log_interval_s = log_interval_s
        self.started = self.last_logged = time.monotonic()
        self.bar = tqdm(
            total=total_docs,
            desc=self.label,
            unit="doc",
            leave=True,
            dynamic_ncols=True,
            disable=None if show_bar else True,  # None: tqdm disables itself when stderr is not a TTY
        )

    def advance_to(self, docs: float) -> None:
        """`docs` (possibly fractional: a share of a group's micro-batches) are done; never backwards."""
        docs = min(float(self.total), max(self.done, docs))
        shown = int(docs) - int(self.done)
        self.done = docs
        if shown:
            self.bar.update(shown)
        now = time.monotonic()
        if self.log is not None and now - self.last_logged >= self.log_interval_s:
            self.last_logged = now
            with self.bar.external_write_mode():
                self.log(self.line(now))

    def line(self, now: float | None = None) -> str:
        """`<label>: 120/300 docs (40%), 12.3 docs/s, 0:15 left`."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = format_interval((self.total - self.done) / rate) if rate > 0 else "?"
        percent = 100.0 * self.done / self.total if self.total else 100.0
        return f"{self.label}: {int(self.done)}/{self.total} docs ({percent:.0f}%), {rate:.1f} docs/s, {left} left"

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> EvaluationProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
