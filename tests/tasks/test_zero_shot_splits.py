"""A 0-shot task needs only its evaluation split: a data dir without the few-shot split works."""

import shutil

import pytest

from lighteval_nanotron.tasks import Registry, set_data_dirs
from lighteval_nanotron.tasks.data_dirs import BUNDLED, candidate_locations

TASKS = [
    "lighteval|arc:easy|0",
    "lighteval|hellaswag|0",
    "leaderboard|hellaswag|0",
    "lighteval|piqa|0",
    "leaderboard|winogrande|0",
]


def _evaluation_split_only(task, root):
    """Copy the shipped slice's evaluation split(s) of `task` into data dir `root`, nothing else."""
    source = candidate_locations(task.dataset_path, task.dataset_config_name, (BUNDLED,))[0]
    target = root / task.dataset_path / (task.dataset_config_name or "default")
    target.mkdir(parents=True)
    copied = []
    for path in source.iterdir():
        if path.name.split(".")[0] in task.evaluation_split:
            shutil.copy(path, target / path.name)
            copied.append(path.name)
    assert copied, f"no evaluation split of {task.full_name} in {source}"
    assert task.fewshot_split is not None and task.fewshot_split not in task.evaluation_split
    return copied


@pytest.mark.parametrize("spec", TASKS)
def test_a_zero_shot_task_reads_only_its_evaluation_split(spec, tmp_path):
    set_data_dirs([str(tmp_path)])
    (task,) = Registry(tasks=spec).load_tasks().values()
    _evaluation_split_only(task, tmp_path)
    docs = task.get_docs(max_samples=5)
    assert len(docs) == 5 and all(doc.fewshot_samples == [] for doc in docs)


def test_a_one_shot_task_still_names_the_missing_few_shot_split(tmp_path):
    from lighteval_nanotron.errors import DatasetLoadError

    set_data_dirs([str(tmp_path)])
    (task,) = Registry(tasks="lighteval|arc:easy|1").load_tasks().values()
    _evaluation_split_only(task, tmp_path)
    with pytest.raises(DatasetLoadError, match=f"split '{task.fewshot_split}' is not in dataset"):
        task.get_docs(max_samples=5)
