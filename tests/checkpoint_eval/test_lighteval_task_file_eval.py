"""`eval` with task files written for lighteval 0.11 (`metrics=`, `suite=`) and 0.13 (no suite, inspect-ai
fields, a `task|k` spec) gives the results of the same task written for this project."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoint_eval.test_eval_cli import REPO, _env

HERE = Path(__file__).parent


def _eval(checkpoint: Path, output_dir: Path, custom_tasks: Path, spec: str) -> tuple[dict, str]:
    command = [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks", spec,
        "--custom-tasks", str(custom_tasks), "--output-dir", str(output_dir), "--dtype", "float32",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = (output_dir / "results").rglob("results_*.json")
    return json.loads(results_file.read_text())["results"], done.stderr


def test_eval_with_lighteval_task_files_matches_ours(tiny_converted, tmp_path):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks.lighteval_adapter import installed_version

    _, checkpoint = tiny_converted
    ours, _ = _eval(checkpoint, tmp_path / "ours", HERE / "capitals_tasks.py", "custom|capitals|0")
    v011, _ = _eval(checkpoint, tmp_path / "v011", HERE / "capitals_lighteval_tasks.py", "custom|capitals|0")
    assert v011["custom|capitals|0"] == ours["custom|capitals|0"]
    assert set(ours["custom|capitals|0"]) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}
    if installed_version().release[:2] < (0, 12):
        pytest.skip("the lighteval 0.13 file needs lighteval >= 0.12 (inspect-ai fields)")
    v013, stderr = _eval(checkpoint, tmp_path / "v013", HERE / "capitals_lighteval013_tasks.py", "capitals|0")
    assert v013["custom|capitals|0"] == ours["custom|capitals|0"]
    assert "inspect-ai field(s) filter, sample_fields, sample_to_fewshot, scorer, solver are ignored" in stderr
