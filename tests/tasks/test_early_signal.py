"""The built-in early-signal suite: one name in a task list, expanded like a task group."""

import types

from lighteval_nanotron.tasks import Registry
from lighteval_nanotron.tasks.early_signal import EARLY_SIGNAL_TASKS
from lighteval_nanotron.tasks.formulations import formulation_tasks


def test_early_signal_expands_to_the_cloze_suite():
    tasks = Registry("early_signal").load_tasks()
    assert len(tasks) == 8 + 57
    assert list(tasks)[:8] == EARLY_SIGNAL_TASKS[:8]
    assert all(name.startswith("lighteval|mmlu_eng_cf:") for name in list(tasks)[8:])
    for task in tasks.values():
        assert [m.metric_name for m in task.config.metrics] == [
            "acc",
            "acc_norm",
            "gold_bpb",
            "normalized_mc_prob_norm",
        ]
        assert task.config.num_fewshots == 0


def test_early_signal_beside_other_specs_and_a_custom_group_of_the_same_name():
    assert list(Registry("lighteval|arc:easy|0,early_signal").load_tasks())[:2] == [
        "lighteval|arc:easy|0",
        "lighteval|arc_eng_cf:easy|0",
    ]
    custom = types.ModuleType("my_tasks")
    custom.TASKS_TABLE = formulation_tasks(["anatomy"])[:1]
    custom.TASKS_GROUPS = {"early_signal": "lighteval|piqa_eng_cf|0"}
    assert list(Registry("early_signal", custom_tasks=custom).load_tasks()) == ["lighteval|piqa_eng_cf|0"]
