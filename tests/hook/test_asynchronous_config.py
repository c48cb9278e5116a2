"""The `asynchronous:` keys of the hook's section, checked when the YAML is read (before any process
trains): what a launched evaluation of a saved checkpoint cannot do is refused with the key named."""

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.options.launch import AsyncEvaluationConfig
from tests.hook.training_runs import write_config

LOCAL_CPU = {"launcher": "local", "cpu": True}


@pytest.mark.parametrize(
    "section, words",
    [
        ({"eval_at_start": True}, r"lighteval_nanotron\.eval_at_start with asynchronous: no checkpoint"),
        ({"stop_on_failure": True}, r"lighteval_nanotron\.stop_on_failure with asynchronous"),
        ({"loggers": ["log"]}, r"lighteval_nanotron\.loggers with asynchronous: the launched evaluation writes"),
    ],
)
def test_what_a_launched_evaluation_cannot_do_is_refused(section, words):
    with pytest.raises(ConfigError, match=f"^{words}"):
        EvaluationConfig(tasks="a|b|0", asynchronous=AsyncEvaluationConfig(**LOCAL_CPU), **section)


def test_eval_interval_file_needs_asynchronous():
    with pytest.raises(ConfigError, match=r"^lighteval_nanotron\.eval_interval_file .*asynchronous"):
        EvaluationConfig(tasks="a|b|0", eval_interval_file="interval.txt")


def test_an_interval_file_is_read_in_the_digits_0_to_9_only(tmp_path, caplog):
    """int() read `1_0` as 10 and `٣` (another script's 3) as 3: each changed which checkpoints are evaluated."""
    from lighteval_nanotron.hook.asynchronous import evaluator_for

    interval_file = tmp_path / "eval_interval.txt"
    asynchronous = AsyncEvaluationConfig(**LOCAL_CPU)
    section = {"tasks": "a|b|0", "eval_interval": 2, "eval_interval_file": str(interval_file)}
    config = EvaluationConfig(**section, asynchronous=asynchronous)
    evaluator = evaluator_for(config).how
    for text in ("1_0", "\u0663", "4.0", "+4", "true"):
        interval_file.write_text(text + "\n")
        evaluator._read_interval_file(checkpoint_interval=1)
        assert evaluator.eval_interval == 2, text
        assert f"says {text!r}, not a number of steps (digits 0-9)" in caplog.text
    interval_file.write_text(" 4\n")
    evaluator._read_interval_file(checkpoint_interval=1)
    assert evaluator.eval_interval == 4


def _check(tmp_path, **changes):
    from lighteval_nanotron.training.config_check import check_training_config

    path = write_config(tmp_path, train_steps=4, checkpoint_interval=2, section={"asynchronous": LOCAL_CPU})
    content = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        section, _, name = key.partition(".")
        if value is None:
            content[section].pop(name)
        else:
            content[section][name] = value
    path.write_text(yaml.safe_dump(content))
    return check_training_config(str(path))


def test_the_section_with_asynchronous_reads_and_is_checked_against_training(tmp_path):
    section = _check(tmp_path).lighteval_nanotron
    assert (section.asynchronous.launcher, section.asynchronous.cpu, section.eval_interval) == ("local", True, 2)
    with pytest.raises(ConfigError, match="eval_interval=3 with asynchronous: .*checkpoint"):
        _check(tmp_path, **{"lighteval_nanotron.eval_interval": 3})
    with pytest.raises(ConfigError, match=r"unknown key 'lighteval_nanotron\.asynchronous\.max_inflight'"):
        _check(tmp_path, **{"lighteval_nanotron.asynchronous": {**LOCAL_CPU, "max_inflight": 2}})
    with pytest.raises(ConfigError, match=r"asynchronous\.poll_interval_s': it is renamed 'status_interval_s'"):
        _check(tmp_path, **{"lighteval_nanotron.asynchronous": {**LOCAL_CPU, "poll_interval_s": 0.2}})
    with pytest.raises(ConfigError, match=r"lighteval_nanotron\.asynchronous\.timeout_s is 0"):
        _check(tmp_path, **{"lighteval_nanotron.asynchronous": {**LOCAL_CPU, "timeout_s": 0}})
    with pytest.raises(ConfigError, match=r"asynchronous: .*GPUs .*devices"):
        _check(tmp_path, **{"lighteval_nanotron.asynchronous": {"launcher": "local"}})
