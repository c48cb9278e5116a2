"""The hook with task files written for lighteval 0.11 and 0.13 evaluates like the same task written here."""

from pathlib import Path

import pytest

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import results_files, train_worker, write_config

CHECKPOINT_EVAL = Path(__file__).resolve().parents[1] / "checkpoint_eval"
TASK = "custom|capitals|0"


def _train(folder: Path, custom_tasks: str, spec: str = TASK) -> dict:
    section = {"tasks": spec, "custom_tasks": custom_tasks, "data_dirs": []}
    folder.mkdir()
    config = write_config(folder, train_steps=2, section=section)
    (report,) = run_distributed(train_worker, 1, str(config), timeout=240)
    assert report["failures"] == []
    (content,) = results_files(folder / "eval").values()
    return content["results"][TASK]


def test_hook_with_lighteval_task_files_matches_ours(tmp_path):
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks.lighteval_adapter import installed_version

    ours = _train(tmp_path / "ours", str(CHECKPOINT_EVAL / "capitals_tasks.py"))
    v011 = _train(tmp_path / "v011", str(CHECKPOINT_EVAL / "capitals_lighteval_tasks.py"))
    assert v011 == ours and set(v011) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}
    if installed_version().release[:2] < (0, 12):
        pytest.skip("the lighteval 0.13 file needs lighteval >= 0.12 (inspect-ai fields)")
    v013 = _train(tmp_path / "v013", str(CHECKPOINT_EVAL / "capitals_lighteval013_tasks.py"), spec="capitals|0")
    assert v013 == ours
