"""What a new user meets first on `lighteval-nanotron eval`, end to end as a process: a GGUF file
given as the checkpoint, and a checkpoint whose tokenizer path resolves nowhere without a network:
one `error:` line naming the fix, exit status 2, at once."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _eval(argv: list, cwd: Path, **env) -> tuple[subprocess.CompletedProcess, float]:
    base = {key: value for key, value in os.environ.items() if not key.endswith("_OFFLINE")}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lighteval_nanotron", "eval", *argv, "--cpu", "--tasks", "lighteval|arc:easy|0"],
        cwd=cwd,
        env={**base, "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, time.perf_counter() - started


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_gguf_file_points_at_convert_gguf(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    done, _ = _eval(["model.gguf"], tmp_path, HF_HUB_OFFLINE="1")
    assert done.returncode == 2, done.stderr[-2000:]
    assert _error_lines(done.stderr) == [
        "error: model.gguf is a GGUF file, not a Nanotron checkpoint: convert it first, `lighteval-nanotron convert "
        "gguf model.gguf checkpoints/model`, then evaluate checkpoints/model."
    ]


def test_a_tokenizer_that_resolves_nowhere_offline_ends_at_once(tiny_converted, tmp_path):
    _, converted = tiny_converted
    checkpoint = tmp_path / "run" / "checkpoints" / "10"
    shutil.copytree(converted, checkpoint)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (checkpoint / name).unlink()
    config = yaml.safe_load((checkpoint / "config.yaml").read_text())
    config["tokenizer"]["tokenizer_name_or_path"] = "tokenizers/gone"  # relative to a training folder we lack
    (checkpoint / "config.yaml").write_text(yaml.safe_dump(config))
    endpoint = f"http://127.0.0.1:{_closed_port()}"  # no network: nothing listens there
    done, seconds = _eval([str(checkpoint)], tmp_path, HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(tmp_path / "cache"))
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = _error_lines(done.stderr)
    assert "The tokenizer 'tokenizers/gone' is not a folder here" in line and "the Hub cannot be reached" in line
    assert line.endswith("Set --tokenizer to a folder that holds tokenizer.json / tokenizer_config.json.")
    assert "Retrying" not in done.stderr and "Traceback" not in done.stderr
    assert seconds < 60, seconds  # the whole command, imports included (the Hub client's retries took ~50 s more)
