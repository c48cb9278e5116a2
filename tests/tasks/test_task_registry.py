import dataclasses
import logging
import sys

import pytest

from lighteval_nanotron.errors import CustomTasksError, TaskSpecError, UnknownTaskError
from lighteval_nanotron.tasks import LightevalTask, LightevalTaskConfig, Registry
from tests.tasks.toy_paths import DATA_DIR, TOY_TASKS


def test_specs_resolve_in_order_with_fewshots(load_toy):
    tasks = load_toy("custom|toy_gen|0,toy_mc:train_fs|2,toy_mc_random")
    assert list(tasks) == ["custom|toy_gen|0", "custom|toy_mc:train_fs|2", "custom|toy_mc_random|0"]
    assert all(isinstance(t, LightevalTask) for t in tasks.values())
    assert tasks["custom|toy_mc:train_fs|2"].config.num_fewshots == 2


def test_every_suite_of_a_config_is_a_key_and_names_the_task(load_toy):
    registry = Registry(custom_tasks=TOY_TASKS)
    configs = registry.create_task_config_dict([c for c in sys.modules[registry._custom_module.__name__].TASKS_TABLE])
    assert "custom|toy_mc:train_fs" in configs and "toy|toy_mc:train_fs" in configs
    task = next(iter(load_toy("toy|toy_mc:train_fs|1").values()))
    assert task.full_name == "toy|toy_mc:train_fs|1"
    assert task.config.suite == ["toy", "custom"]


def test_superset_expands_sorted(load_toy):
    assert list(load_toy("custom|toy_mc|1")) == [
        "custom|toy_mc:eval_fs|1",
        "custom|toy_mc:sampled|1",
        "custom|toy_mc:train_fs|1",
    ]
    assert list(load_toy("toy_mc")) == [
        "custom|toy_mc:eval_fs|0",
        "custom|toy_mc:sampled|0",
        "custom|toy_mc:train_fs|0",
    ]


def test_task_groups_and_task_list_files(load_toy):
    assert list(load_toy("toy_group")) == ["custom|toy_mc:train_fs|1", "custom|toy_gen|0"]
    assert list(load_toy("toy_list_group")) == ["custom|toy_gen|2"]
    assert list(load_toy(str(DATA_DIR / "task_list.txt"))) == [
        "custom|toy_gen|0",
        "custom|toy_mc:train_fs|2",
        "custom|toy_mc:sampled|1",
    ]


def test_duplicates_are_dropped_keeping_first_position(load_toy):
    assert list(load_toy("toy_gen|0,toy_mc:sampled|1,custom|toy_gen|0,toy_mc:sampled")) == [
        "custom|toy_gen|0",
        "custom|toy_mc:sampled|1",
        "custom|toy_mc:sampled|0",
    ]


def test_four_part_spec_sets_truncate(load_toy):
    with pytest.warns(FutureWarning):
        task = load_toy("custom|toy_gen|1|1")["custom|toy_gen|1"]
    assert task.config.truncate_fewshots is True


def test_metric_params_parametrize_a_copy(load_toy):
    task = load_toy("custom|toy_mc:train_fs@k=5|0")["custom|toy_mc:train_fs|0"]
    (metric,) = task.metrics
    assert metric.metric_name == "acc_with_k" and metric.sample_level_fn.k == 5
    plain = load_toy("custom|toy_mc:train_fs|0")["custom|toy_mc:train_fs|0"]
    assert plain.metrics[0].metric_name == "acc" and plain.metrics[0].sample_level_fn.k == 1


def test_metric_params_apply_only_to_metrics_that_accept_them(load_toy):
    em, ppl = load_toy("toy_gen@k=2")["custom|toy_gen|0"].metrics
    assert em.metric_name == "em_with_k" and ppl.metric_name == "ppl"  # ppl's sample fn is len()


def test_metric_param_nobody_accepts_is_an_error(load_toy):
    with pytest.raises(TaskSpecError, match="no metric .*accepts parameter"):
        load_toy("toy_gen@temperature=0.5")


def test_an_invalid_metric_param_value_names_the_task():
    """pass@k with k above its n was refused without saying which task's spec set it."""
    from lighteval_nanotron.metrics import Metrics
    from lighteval_nanotron.tasks.registry import parametrize_metrics

    with pytest.raises(TaskSpecError, match=r"lighteval\|toy\|0@k=40: pass@k: n .*>= k \(40\)"):
        parametrize_metrics([Metrics.pass_at_1], {"k": 40}, "lighteval|toy|0@k=40")


def test_same_task_with_different_params_is_an_error(load_toy):
    with pytest.raises(TaskSpecError, match="collide"):
        load_toy("toy_gen@k=1,toy_gen@k=2")


def test_real_metrics_accept_spec_parameters(toy_data_dirs):
    metrics = pytest.importorskip("lighteval_nanotron.metrics")
    acc = getattr(getattr(metrics, "Metrics", None), "loglikelihood_acc", None)
    if acc is None:
        pytest.skip("lighteval_nanotron.metrics.Metrics.loglikelihood_acc is not available")
    config = LightevalTaskConfig(name="real", prompt_function=len, hf_repo="toy/mc", hf_subset="default", metrics=[acc])
    module = type(sys)("real_metric_tasks")
    module.TASKS_TABLE = [config]
    task = Registry("real@logprob_normalization=char", custom_tasks=module).load_tasks()["custom|real|0"]
    assert task.metrics[0].metric_name != acc.metric_name


def test_custom_tasks_override_defaults_and_resolve_without_suite():
    config = LightevalTaskConfig(
        name="mine", prompt_function=len, hf_repo="r", hf_subset="s", metrics=[], suite=["lighteval"]
    )
    module = type(sys)("override_tasks")
    module.TASKS_TABLE = [config]
    tasks = Registry("mine|1", custom_tasks=module).load_tasks()
    assert list(tasks) == ["lighteval|mine|1"]


def test_ambiguous_bare_name_asks_for_the_suite():
    a = LightevalTaskConfig(name="twin", prompt_function=len, hf_repo="r", hf_subset="s", metrics=[], suite=["s1"])
    b = dataclasses.replace(a, suite=["s2"])
    module = type(sys)("twin_tasks")
    module.TASKS_TABLE = [a, b]
    with pytest.raises(TaskSpecError, match="ambiguous.*s1\\|twin\\|0.*s2\\|twin\\|0"):
        Registry("twin", custom_tasks=module)
    assert list(Registry("s2|twin|0", custom_tasks=module).load_tasks()) == ["s2|twin|0"]


def test_unknown_task_suggests_close_names():
    with pytest.raises(UnknownTaskError, match="Did you mean: custom\\|toy_mc:train_fs"):
        Registry("custom|toy_mc:trainfs|0", custom_tasks=TOY_TASKS)
    with pytest.raises(UnknownTaskError, match="toy_gen"):
        Registry("toy_gem", custom_tasks=TOY_TASKS)
    with pytest.raises(KeyError):  # UnknownTaskError is also a KeyError
        Registry("nothing_like_it|0", custom_tasks=TOY_TASKS)


def test_custom_tasks_from_module_name_and_module(monkeypatch):
    monkeypatch.syspath_prepend(str(DATA_DIR))
    by_name = Registry("toy_gen", custom_tasks="toy_tasks").load_tasks()
    import toy_tasks

    by_module = Registry("toy_gen", custom_tasks=toy_tasks).load_tasks()
    assert list(by_name) == list(by_module) == ["custom|toy_gen|0"]
    assert Registry.create_custom_tasks_module(toy_tasks) is toy_tasks


def test_custom_tasks_file_errors(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(CustomTasksError, match="broken.py.*not_a_module_anywhere"):
        Registry(custom_tasks=broken)
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(CustomTasksError, match="no TASKS_TABLE"):
        Registry(custom_tasks=str(empty))
    wrong = tmp_path / "wrong.py"
    wrong.write_text("TASKS_TABLE = [{'name': 'x'}]\n")
    with pytest.raises(CustomTasksError, match="LightevalTaskConfig"):
        Registry(custom_tasks=wrong)
    with pytest.raises(CustomTasksError, match="does not exist"):
        Registry(custom_tasks=str(tmp_path / "missing.py"))
    with pytest.raises(CustomTasksError, match="no_such_module_xyz"):
        Registry(custom_tasks="no_such_module_xyz")


def test_load_tasks_without_specs_returns_every_task():
    tasks = Registry(custom_tasks=TOY_TASKS).load_tasks()
    assert "custom|toy_gen|0" in tasks and "toy|toy_mc:train_fs|0" in tasks


def test_print_all_tasks(capsys):
    Registry(custom_tasks=TOY_TASKS).print_all_tasks("toy,custom")
    out = capsys.readouterr().out
    assert "- toy:\n  - toy|toy_mc:train_fs" in out
    assert "  - custom|toy_gen" in out
    Registry(custom_tasks=TOY_TASKS).print_all_tasks(["nosuchsuite"])
    assert "(no tasks in this suite)" in capsys.readouterr().out


def test_builtin_names_resolve_when_the_core_table_exists():
    registry = Registry()
    names = registry.task_names()
    if "lighteval|arc:easy" not in names:
        pytest.skip("the core task table is not there yet")
    tasks = Registry("lighteval|arc:easy|0,leaderboard|arc:challenge|25").load_tasks()
    assert list(tasks) == ["lighteval|arc:easy|0", "leaderboard|arc:challenge|25"]


def test_optional_suite_tables_load_lazily(caplog):
    with caplog.at_level(logging.INFO):
        registry = Registry(load_extended=True, load_community=True, load_multilingual=True)
    assert {"extended", "community", "multilingual"} <= registry._loaded_suites
