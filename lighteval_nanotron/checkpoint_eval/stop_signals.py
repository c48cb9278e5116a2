"""SIGINT/SIGTERM as a request to stop at the next safe point, not an exception in the middle of a write.

    with stop_signals() as stop:
        while not stop.reason:
            ...                    # one unit of work, never interrupted
            stop.wait(30)          # returns at once when a signal arrives

The first signal only records itself (`reason`) and wakes `wait`; a second one restores the
previous handlers and is delivered again, so a second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Whether a stop was asked for, and a sleep that a stop request cuts short."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason
        self._event.set()

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`; return early on a stop request."""
        self._event.wait(seconds)


@contextlib.contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """Within the block, SIGINT and SIGTERM set `reason` instead of stopping the process (main thread only)."""
    stop = StopRequest()
    previous: dict[int, Any] = {}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)
        previous.clear()

    def handle(number: int, _frame: Any) -> None:
        if stop.reason is not None:  # the second signal: the default behaviour, at once
            restore()
            signal.raise_signal(number)
            return
        stop.request(f"{signal.Signals(number).name} received")

    for number in SIGNALS:
        previous[number] = signal.signal(number, handle)
    try:
        yield stop
    finally:
        restore()
