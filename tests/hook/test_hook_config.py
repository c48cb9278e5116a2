"""The `lighteval_nanotron:` section: defaults, normalisation and every check, from the real YAML."""

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.nanotron_compat.variant import CONFIG_FOLDERS, shipped_config
from lighteval_nanotron.options.hook import EvaluationConfig

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("tiny_cpu_train.yaml", "llama_1b_train_with_eval.yaml", "demo_train.yaml")
TINY_CONFIG, GPU_CONFIG = (shipped_config(name) for name in SHIPPED[:2])


def test_tasks_string_becomes_list():
    config = EvaluationConfig(tasks=" lighteval|arc:easy|0 ,lighteval|piqa|0,", eval_interval=5)
    assert config.tasks == ["lighteval|arc:easy|0", "lighteval|piqa|0"]
    assert config.loggers == ["json", "details", "tensorboard", "log"]
    assert config.eval_at_end and not config.stop_on_failure


def test_data_dirs_string_becomes_list():
    assert EvaluationConfig(tasks="a|b|0", data_dirs="bundled").data_dirs == ["bundled"]


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"tasks": " , "}, "tasks is empty"),
        ({"eval_interval": 0}, "eval_interval is 0"),
        ({"eval_interval": -3}, "eval_interval is -3"),
        ({"max_samples": 0}, "max_samples is 0"),
        ({"tokens_per_batch": 0}, "tokens_per_batch is 0"),
        ({"loggers": ["json", "mlflow"]}, "unknown logger(s) ['mlflow']"),
        ({"loggers": ["json", "json"]}, "twice"),
        ({"wandb_mode": "cloud"}, "wandb_mode"),
        ({"output_dir": ""}, "output_dir is empty"),
        ({"fewshot_draws": "harness"}, "fewshot_draws is 'harness': use one of ['lighteval', 'per_doc']"),
        ({"eval_at_end": False}, "never evaluates"),
    ],
)
def test_bad_values_raise_config_error_with_fix(overrides, words):
    values = {"tasks": "lighteval|arc:easy|0", **overrides}
    with pytest.raises(ConfigError) as info:
        EvaluationConfig(**values)
    assert words in str(info.value)
    assert str(info.value).startswith("lighteval_nanotron")


def test_checks_against_training_config():
    config = EvaluationConfig(tasks="lighteval|arc:easy|0", eval_interval=50, eval_at_checkpoints=True)
    with pytest.raises(ConfigError, match="larger than tokens.train_steps=10"):
        config.check_against_training(train_steps=10, checkpoint_interval=5)
    with pytest.raises(ConfigError, match="no checkpoints section"):
        config.check_against_training(train_steps=100, checkpoint_interval=None)
    config.check_against_training(train_steps=100, checkpoint_interval=5)


def test_shipped_configs_load_as_nanotron_configs(tmp_path):
    from lighteval_nanotron.hook.training_config import TrainingConfigWithEvaluation, load_training_config

    for path in map(shipped_config, SHIPPED):
        config = load_training_config(str(path))
        assert isinstance(config, TrainingConfigWithEvaluation)
        assert isinstance(config.lighteval_nanotron, EvaluationConfig)
        assert config.lighteval_nanotron.tasks
        # Nanotron saves the config next to each checkpoint and reads it back: the section survives.
        saved = tmp_path / path.name
        config.save_as_yaml(str(saved))
        assert load_training_config(str(saved)).lighteval_nanotron == config.lighteval_nanotron


def test_section_is_optional(tmp_path, caplog):
    from lighteval_nanotron.hook.training_config import load_training_config

    content = yaml.safe_load(TINY_CONFIG.read_text())
    del content["lighteval_nanotron"]
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(content))
    assert load_training_config(str(path)).lighteval_nanotron is None
    assert "section is empty" not in caplog.text
    # every key commented out (or a saved config of a run without evaluation): trains without evaluation, said
    path.write_text(yaml.safe_dump(content) + "lighteval_nanotron:\n#  tasks: lighteval|arc:easy|0\n")
    assert load_training_config(str(path)).lighteval_nanotron is None
    assert "the lighteval_nanotron: section is empty: this run trains without evaluation" in caplog.text


@pytest.mark.parametrize(
    "section_update, error",
    [
        ({"eval_interval": 0}, "eval_interval is 0"),
        ({"eval_interval": 1000}, "larger than tokens.train_steps"),
        ({"loggers": ["json", "neptune"]}, "unknown logger"),
        ({"evaluate_every": 3}, "evaluate_every"),
    ],
)
def test_bad_section_fails_when_yaml_is_read(tmp_path, section_update, error):
    from lighteval_nanotron.hook.training_config import load_training_config

    content = yaml.safe_load(TINY_CONFIG.read_text())
    content["lighteval_nanotron"].update(section_update)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(Exception) as info:
        load_training_config(str(path))
    assert error in str(info.value)


ADAM_KEYS = ("adam_eps", "adam_beta1", "adam_beta2", "torch_adam_is_fused")


def _in_main_schema(content: dict) -> dict:
    """A Nanotron 0.4 training config in current Nanotron's schema: the optimizer named in
    `optimizer.optimizer_factory`, the data as one `data_stages` stage from step 1."""
    content = dict(content)
    optimizer = dict(content["optimizer"])
    factory = {key: optimizer.pop(key) for key in ADAM_KEYS}
    content["optimizer"] = {**optimizer, "optimizer_factory": {"name": "adamW", **factory}}
    stage = {"start_training_step": 1, "data": content.pop("data")}
    content["data_stages"] = [stage]
    return content


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_of_both_nanotrons_differ_only_in_schema(name):
    v04 = yaml.safe_load((REPO / CONFIG_FOLDERS["0.4"] / name).read_text())
    main = yaml.safe_load((REPO / CONFIG_FOLDERS["main"] / name).read_text())
    assert len(main["data_stages"]) == 1 and main["data_stages"][0].pop("name")
    assert main == _in_main_schema(v04)


def test_data_stage_steps_left_counts_to_the_next_stage_or_the_end():
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.training.data.dataloader import stage_steps_left

    config = load_training_config(str(shipped_config("demo_train.yaml")))
    stages = getattr(config, "data_stages", None)
    if not stages:
        pytest.skip("Nanotron 0.4 has one data section, no data stages")
    stage = stages[0]
    assert stage_steps_left(config, stage, last_step=0) == config.tokens.train_steps
    assert stage_steps_left(config, stage, last_step=40) == config.tokens.train_steps - 40
    later = dataclasses.replace(stage, name="later", start_training_step=31)
    config.data_stages = [stage, later]
    assert stage_steps_left(config, stage, last_step=10) == 20
    assert stage_steps_left(config, later, last_step=10) == config.tokens.train_steps - 30
    assert stage_steps_left(config, stage, last_step=35) == 0


@pytest.mark.parametrize(
    "update, words",
    [
        ({"lighteval_nanotron": {"loggers": "json"}}, "lighteval_nanotron.loggers is 'json': give a list of strings."),
        ({"lighteval_nanotron": {"use_chat_template": "false"}}, "use_chat_template is 'false': give true or false."),
        ({"lighteval_nanotron": {"asynchronous": {"env": {"A": 1}}}}, "env is {'A': 1}: give a mapping of strings to"),
        ({"tokens": {"train_steps": "10"}}, "tokens.train_steps is '10': give an integer."),
    ],
)
def test_a_value_of_another_type_is_named_as_the_yaml_wrote_it(tmp_path, update, words):
    """dacite's message showed a list given a string as `<generator object ...>`."""
    from lighteval_nanotron.training.config_check import check_training_config

    content = yaml.safe_load(TINY_CONFIG.read_text())
    for section, values in update.items():
        content[section].update(values)
    path = tmp_path / "typed.yaml"
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: ") + ".*" + re.escape(words)):
        check_training_config(str(path))


def test_a_typo_is_named_with_the_closest_key_both_ways_in(tmp_path):
    """`train` (check_training_config) and `EvaluatingTrainer(config_file)` (load_training_config) alike:
    Nanotron's reader said only 'can not match "train_step" to any data class field'."""
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.training.config_check import check_training_config

    typos = [("lighteval_nanotron", "max_sample", "max_samples"), ("tokens", "train_step", "train_steps")]
    for section, key, closest in typos:
        content = yaml.safe_load(TINY_CONFIG.read_text())
        content[section][key] = 5
        path = tmp_path / f"{key}.yaml"
        path.write_text(yaml.safe_dump(content))
        for read in (check_training_config, load_training_config):
            words = f"{path}: unknown key '{section}.{key}': did you mean '{closest}'?"
            with pytest.raises(ConfigError, match=re.escape(words)):
                read(str(path))
