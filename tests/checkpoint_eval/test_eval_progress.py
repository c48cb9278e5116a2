"""`eval` on a terminal: the progress bar advances per micro-batch (several distinct counts with
docs/s while three tasks run in one request group) and stays on screen when the evaluation ends.
The command runs with its stderr on a pseudo-terminal, as a user's shell would give it; off a
terminal the same progress comes as lines at a bounded rate."""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASKS = "lighteval|arc:easy|0,lighteval|piqa|0,lighteval|hellaswag|0"
DOCS_PER_TASK = 40
BAR = re.compile(r"evaluation(?: at step \d+)?:\s+(\d+)%\|[^|]*\|\s*(\d+)/(\d+) \[[^\]]*doc/s\]")


def _argv(checkpoint: Path, output_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks", TASKS,
        "--max-samples", str(DOCS_PER_TASK), "--data-dir", "bundled", "--tokens-per-batch", "256",
        "--output-dir", str(output_dir), "--loggers", "json",
    ]  # fmt: skip


def _env(**extra) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **extra}


def _run_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal; returns the exit status and what it drew there.
    tqdm draws every update (TQDM_MININTERVAL=0): how often the bar moves is then the code's doing."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column window
    process = subprocess.Popen(
        argv, cwd=REPO, env=_env(TQDM_MININTERVAL="0", TQDM_MINITERS="1"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    drawn = bytearray()
    while True:
        ready, _, _ = select.select([controller], [], [], 600)
        if not ready:
            process.kill()
            raise AssertionError("no output for 600 s")
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process has ended
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    return process.wait(timeout=60), drawn.decode(errors="replace")


def _screen(drawn: str) -> list[str]:
    """The lines left on screen: each line as its last carriage return left it."""
    return [line.rsplit("\r", 1)[-1] for line in drawn.replace("\r\n", "\n").split("\n")]


def test_the_bar_advances_per_micro_batch_and_stays_on_screen(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    status, drawn = _run_on_a_terminal(_argv(checkpoint, tmp_path / "out"))
    assert status == 0, drawn[-3000:]
    total = 3 * DOCS_PER_TASK
    updates = [match.groups() for match in BAR.finditer(drawn)]
    assert updates and {int(t) for _, _, t in updates} == {total}, drawn[-3000:]
    counts = sorted({int(done) for _, done, _ in updates})
    assert len([c for c in counts if 0 < c < total]) >= 3, counts  # not one jump per request group
    assert counts[-1] == total
    final = [line for line in _screen(drawn) if BAR.search(line)]
    assert final, "the bar was erased at the end"
    assert BAR.search(final[-1]).groups()[:2] == ("100", str(total)) and "doc/s" in final[-1]


def test_off_a_terminal_progress_comes_as_lines(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    argv = [*_argv(checkpoint, tmp_path / "out"), "--progress-interval-s", "0"]
    done = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("evaluation: ")]
    assert len(lines) >= 3, done.stderr[-3000:]
    pattern = re.compile(rf"evaluation: (\d+)/{3 * DOCS_PER_TASK} docs \((\d+)%\), [\d.]+ docs/s, [\d:?]+ left")
    assert all(pattern.fullmatch(line) for line in lines), lines
    assert "\r" not in done.stderr and "%|" not in done.stderr  # no bar drawn into a file
