"""The hook with a task file written for lighteval evaluates like the same task written for this project."""

from pathlib import Path

import pytest

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import results_files, train_worker, write_config

CHECKPOINT_EVAL = Path(__file__).resolve().parents[1] / "checkpoint_eval"
TASK = "custom|capitals|0"


def _train(folder: Path, custom_tasks: str) -> dict:
    section = {"tasks": TASK, "custom_tasks": custom_tasks, "data_dirs": []}
    folder.mkdir()
    config = write_config(folder, train_steps=2, section=section)
    (report,) = run_distributed(train_worker, 1, str(config), timeout=240)
    assert report["failures"] == []
    (content,) = results_files(folder / "eval").values()
    return content["results"][TASK]


@pytest.mark.distributed
def test_hook_with_a_lighteval_task_file_matches_ours(tmp_path):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    ours = _train(tmp_path / "ours", str(CHECKPOINT_EVAL / "capitals_tasks.py"))
    theirs = _train(tmp_path / "theirs", str(CHECKPOINT_EVAL / "capitals_lighteval_tasks.py"))
    assert theirs == ours and set(theirs) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}
