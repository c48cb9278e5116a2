"""Where results go can fail: an output folder that cannot be written (a file in the way, a full
disk) is refused before anything is evaluated; one that fails while results are written costs only
that logger (the others write, earlier files are intact); W&B without credentials and a TensorBoard
writer thread that fails give one `error:` line, no traceback. Real files, a real file-size limit
(RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk), the real `eval` command."""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.helpers.distributed import run_distributed

TASK = "lighteval|arc:easy|0"
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _file_size_limit(limit: int | None):
    """Writes past `limit` bytes fail with EFBIG in this process (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _cli_cases(cases: list) -> list:
    """run_distributed worker (1 rank): `lighteval-nanotron eval` per (argv, file size limit, env);
    (exit status, stderr) of each."""
    from lighteval_nanotron.cli.main import main

    outcomes = []
    for argv, limit, env in cases:
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update({key: value for key, value in env.items() if value is not None})
        for key in [key for key, value in env.items() if value is None]:
            os.environ.pop(key, None)
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr), _file_size_limit(limit):
                rc = main(argv)
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        outcomes.append((rc, stderr.getvalue()))
    return outcomes


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


def test_output_failures_end_in_one_error_line_and_keep_what_was_written(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    good, broken = tmp_path / "good", tmp_path / "broken"

    def argv(output: Path, *loggers: str) -> list:
        return ["eval", str(checkpoint), "--cpu", "--tasks", TASK, "--max-samples", "2", "--data-dir", "bundled",
                "--output-dir", str(output), "--model-name", "run", "--loggers", *loggers]  # fmt: skip

    # the step's results folder is a file: the JSON logger fails while writing, the others write
    step_folder = broken / "results" / "run"
    step_folder.parent.mkdir(parents=True)
    step_folder.write_text("in the way")
    no_wandb = {"WANDB_MODE": "online", "WANDB_API_KEY": None, "HOME": str(tmp_path / "home")}
    cases = [
        (argv(good, "json", "details", "tensorboard"), None, {}),
        (argv(blocker / "out", "json", "details"), None, {}),  # cannot be created
        (argv(tmp_path / "full", "json", "details", "tensorboard"), 32 * 1024, {}),  # full disk
        (argv(broken, "json", "details", "tensorboard"), None, {}),
        (argv(tmp_path / "wandb", "json", "wandb"), None, no_wandb),
    ]
    outcomes = run_distributed(_cli_cases, 1, cases, timeout=300)[0]
    ok, missing, full, midway, wandb = outcomes
    assert ok[0] == 0, ok[1][-2000:]
    for rc, err in (missing, full, midway, wandb):
        assert rc == 2 and len(_errors(err)) == 1 and "Traceback" not in err, err[-3000:]
        assert _errors(err)[0] == err.strip().splitlines()[-1]
    assert f"The output folder {blocker / 'out'} cannot be written (" in missing[1]
    assert "cannot be written (OSError: [Errno 27] File too large)" in full[1]
    assert not list((tmp_path / "full").rglob("results_*.json"))  # refused before anything was evaluated
    assert "ResultsJsonLogger: " in midway[1] and "1 results logger(s) failed in log()" in midway[1]
    assert step_folder.read_text() == "in the way" and list((broken / "details").rglob("*.parquet"))
    assert list((broken / "tensorboard").rglob("events.out.tfevents.*"))
    assert "W&B could not open a run (UsageError: No API key configured" in wandb[1]
    assert "wandb login" in wandb[1] and not list((tmp_path / "wandb").rglob("results_*.json"))
    written = json.loads(next((good / "results").rglob("results_*.json")).read_text())
    assert TASK in written["results"]


def _tensorboard_writes_past_the_limit(log_dir: str) -> tuple:
    """Subprocess body: TensorBoard scalars until the event file passes a 4 KiB limit."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracking"))
    from helpers_tracking import make_result

    from lighteval_nanotron.errors import TrackingError
    from lighteval_nanotron.tracking import TrackingConfig

    loggers = TrackingConfig(output_dir=log_dir, loggers=["tensorboard"]).build()
    error = None
    with _file_size_limit(4096):
        for step in range(400):
            try:
                loggers.log(make_result(step=step))
            except TrackingError as caught:
                error = str(caught)
                break
    return error, step


def test_a_failing_tensorboard_writer_thread_is_one_report_without_traceback(tmp_path):
    """In a process of its own: Python's default thread hook (pytest installs its own)."""
    code = (
        "import json, sys; from tests.checkpoint_eval.test_output_failures import _tensorboard_writes_past_the_limit"
        " as run; print(json.dumps(run(sys.argv[1])))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    error, step = json.loads(done.stdout.strip().splitlines()[-1])
    assert error is not None and "TensorBoardLogger: OSError" in error and "File too large" in error, error
    assert 0 < step < 399
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr, done.stderr[-2000:]
