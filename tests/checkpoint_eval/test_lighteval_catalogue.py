"""lighteval's catalogue: tasks we have no built-in for resolve to lighteval's definitions and run on local data."""

import json
import subprocess
import sys

import pytest

from tests.checkpoint_eval.test_eval_cli import REPO, _env

# None of these is a built-in here; their datasets are in the bundled slices (--data-dir bundled).
CATALOGUE_TASKS = [
    "original|arc:c:options|0",
    "original|arc:c:simple|0",
    "helm|mmlu:abstract_algebra|0",
    "helm|mmlu:astronomy|0",
    "helm|mmlu:anatomy|0",
]


def test_catalogue_tasks_evaluate_on_local_data(tiny_converted, tmp_path):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks import Registry

    assert not set(Registry.create_task_config_dict()) & {spec.rsplit("|", 1)[0] for spec in CATALOGUE_TASKS}
    _, checkpoint = tiny_converted
    command = [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu",
        "--tasks", ",".join(CATALOGUE_TASKS),
        "--max-samples", "2", "--data-dir", "bundled", "--output-dir", str(tmp_path), "--dtype", "float32",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = (tmp_path / "results").rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    # the tasks, lighteval's group averages of each family, `all` (as lighteval writes them)
    assert set(results) == {*CATALOGUE_TASKS, "original|arc:_average|0", "helm|mmlu:_average|0", "all"}
    lighteval_keys = {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr"}
    assert lighteval_keys <= set(results["original|arc:c:options|0"])
    assert set(results["original|arc:c:options|0"]) - lighteval_keys <= {
        name + suffix for name in ("acc_centered", "acc_norm_centered") for suffix in ("", "_stderr")
    }
    assert set(results["helm|mmlu:abstract_algebra|0"]) >= {"em", "qem", "pem", "pqem"}
    for task in CATALOGUE_TASKS:
        values = [v for key, v in results[task].items() if not key.endswith(("_stderr", "_centered"))]
        assert all(0 <= value <= 1 for value in values)


def test_tasks_list_shows_the_catalogue(capsys):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks import Registry

    Registry().print_all_tasks("original,helm")
    listed = capsys.readouterr().out
    assert "original|arc:c:options" in listed and "helm|mmlu:abstract_algebra" in listed
