"""A command run in its own process group, followed through its output file: waits are bounded,
and the whole group is killed in `close()` (use it as a context manager), so a test never leaves
a process behind."""

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional


class Followed:
    """`command` in a new session, stdout and stderr into `log`."""

    def __init__(self, command: List[str], log: Path, cwd: Path, env: Dict[str, str]) -> None:
        self.log = log
        self._stream = open(log, "w")
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=self._stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float, count: int = 1) -> None:
        """Until `text` appears `count` times in the output; fails (with the output) on exit or timeout."""
        deadline = time.monotonic() + timeout
        while self.output().count(text) < count:
            if self.process.poll() is not None:
                raise AssertionError(f"exited ({self.process.returncode}) before {text!r}:\n{self.output()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout:.0f}s:\n{self.output()[-4000:]}")
            time.sleep(0.2)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def finish(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout:.0f}s:\n{self.output()[-4000:]}") from None

    def close(self) -> None:
        try:  # the group outlives its leader while any member (a torchrun worker) is alive
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self._stream.close()

    def __enter__(self) -> "Followed":
        return self

    def __exit__(self, *exc: Optional[BaseException]) -> None:
        self.close()
