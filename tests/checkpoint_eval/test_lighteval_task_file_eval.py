"""`eval` with a task file written for lighteval gives the results of the same task written for this project."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoint_eval.test_eval_cli import REPO, _env

HERE = Path(__file__).parent


def _eval(checkpoint: Path, output_dir: Path, custom_tasks: Path) -> dict:
    command = [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks", "custom|capitals|0",
        "--custom-tasks", str(custom_tasks), "--output-dir", str(output_dir), "--dtype", "float32",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = (output_dir / "results").rglob("results_*.json")
    return json.loads(results_file.read_text())["results"]


def test_eval_with_a_lighteval_task_file_matches_ours(tiny_converted, tmp_path):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    _, checkpoint = tiny_converted
    ours = _eval(checkpoint, tmp_path / "ours", HERE / "capitals_tasks.py")
    theirs = _eval(checkpoint, tmp_path / "theirs", HERE / "capitals_lighteval_tasks.py")
    assert theirs["custom|capitals|0"] == ours["custom|capitals|0"]
    assert set(theirs["custom|capitals|0"]) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}
