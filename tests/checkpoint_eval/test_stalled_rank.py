"""A stalled rank (SIGSTOP, not killed: its connections stay open) does not hang the others: the
live rank of a 2-process `lighteval-nanotron eval` ends with one `error:` line within
`--failure-timeout-s` + 15 s. The test is bounded and SIGKILLs the stopped process at the end."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from lighteval_nanotron.parallel.distributed import free_loopback_port, local_rank_env

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 10
TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"


def _launch(rank: int, port: int, checkpoint: Path, output_dir: Path) -> subprocess.Popen:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, **local_rank_env(rank, 2, port), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": path}  # fmt: skip
    command = [sys.executable, "-m", "lighteval_nanotron", "-v", "eval", str(checkpoint), "--cpu", "--dp", "2",
               "--tasks", TASKS, "--max-samples", "8", "--data-dir", "bundled", "--output-dir", str(output_dir),
               "--failure-timeout-s", str(TIMEOUT_S)]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def _collect(stream, lines: list, event: threading.Event, marker: str) -> None:
    for line in stream:
        lines.append(line)
        if marker in line:
            event.set()


def test_a_stopped_rank_turns_into_an_error_on_the_live_rank_in_bounded_time(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    port = free_loopback_port()
    live, stalled = (_launch(rank, port, checkpoint, tmp_path / "out") for rank in (0, 1))
    live_lines: list = []
    stalled_lines: list = []
    prepared = threading.Event()
    readers = [
        threading.Thread(target=_collect, args=(live.stderr, live_lines, prepared, "Prepared"), daemon=True),
        threading.Thread(target=_collect, args=(stalled.stderr, stalled_lines, threading.Event(), ""), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        # the reporting rank says it once for the mesh, after the ranks agreed on the docs: rank 1 is about to evaluate
        assert prepared.wait(timeout=240), "".join(live_lines + stalled_lines)[-3000:]
        stalled.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        rc = live.wait(timeout=TIMEOUT_S + 15)
        ended_after = time.monotonic() - stopped_at
    finally:
        for process in (stalled, live):
            if process.poll() is None:
                process.kill()  # SIGKILL works on a stopped process
            process.wait(timeout=30)
    readers[0].join(timeout=10)
    errors = [line for line in live_lines if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1, "".join(live_lines)[-3000:]
    assert "did not answer within" in errors[0] or "not every rank reported" in errors[0], errors[0]
    print(errors[0].strip())
    print(f"live rank ended {ended_after:.1f}s after the peer was stopped (failure timeout {TIMEOUT_S}s)")


def test_a_killed_rank_turns_into_one_error_line_on_the_live_rank(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    port = free_loopback_port()
    live, killed = (_launch(rank, port, checkpoint, tmp_path / "out") for rank in (0, 1))
    live_lines: list = []
    killed_lines: list = []
    prepared = threading.Event()
    readers = [
        threading.Thread(target=_collect, args=(live.stderr, live_lines, prepared, "Prepared"), daemon=True),
        threading.Thread(target=_collect, args=(killed.stderr, killed_lines, threading.Event(), ""), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        assert prepared.wait(timeout=240), "".join(live_lines + killed_lines)[-3000:]
        killed.kill()  # SIGKILL, as the out-of-memory killer would
        rc = live.wait(timeout=TIMEOUT_S + 15)
    finally:
        for process in (killed, live):
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
    readers[0].join(timeout=10)
    errors = [line for line in live_lines if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1, "".join(live_lines)[-3000:]
    assert "Traceback" not in "".join(live_lines) and live_lines[-1] == errors[0]
    assert not list((tmp_path / "out").rglob("results_*.json"))
