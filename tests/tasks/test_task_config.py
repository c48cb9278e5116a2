import json

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig, SamplingMethod


def prompt(line, task_name):
    return Doc(query=line["q"], choices=["a"], gold_index=0)


def make(**overrides):
    return LightevalTaskConfig(
        **{"name": "t", "prompt_function": prompt, "hf_repo": "r", "hf_subset": "s", "metrics": [], **overrides}
    )


def test_defaults_match_lighteval():
    config = make()
    assert config.hf_revision is None and config.hf_filter is None
    assert config.hf_avail_splits == ["train", "validation", "test"]
    assert config.evaluation_splits == ["validation"]
    assert config.few_shots_split is None and config.few_shots_select is None
    assert config.generation_size is None and config.generation_grammar is None
    assert config.stop_sequence is None and config.num_samples is None
    assert config.suite == ["custom"]
    assert config.original_num_docs == -1 and config.effective_num_docs == -1
    assert config.must_remove_duplicate_docs is False and config.truncate_fewshots is False
    assert config.num_fewshots == 0 and config.version == 0


def test_full_name_uses_first_suite_and_fewshots():
    config = make(suite=["leaderboard", "lighteval"], num_fewshots=25, name="arc:challenge")
    assert config.full_name == "leaderboard|arc:challenge|25"


def test_strings_and_tuples_become_lists():
    config = make(suite="lighteval", evaluation_splits=("test",), stop_sequence="\n", hf_avail_splits=("a", "b"))
    assert config.suite == ["lighteval"]
    assert config.evaluation_splits == ["test"]
    assert config.stop_sequence == ["\n"]
    assert config.hf_avail_splits == ["a", "b"]
    # a few-shot source listed twice changes nothing (it was refused as docs evaluated twice)
    assert make(hf_avail_splits=["train", "test", "train"]).hf_avail_splits == ["train", "test", "train"]
    # lighteval's Arabic and Turkic tasks write few_shots_split=["dev"] (lighteval itself crashes on it past 0-shot)
    assert make(few_shots_split=["dev"]).few_shots_split == "dev"


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"name": "a|b"}, "name"),
        ({"prompt_function": "nope"}, "prompt_function"),
        ({"suite": []}, "suite"),
        ({"evaluation_splits": []}, "evaluation_splits"),
        ({"few_shots_select": "best"}, "few_shots_select"),
        # a list of several crashed with `unhashable type: 'list'` (one, ["dev"], is that split: below)
        ({"few_shots_split": ["dev", "train"]}, r"few_shots_split=\['dev', 'train'\].*one split"),
        # the docs of a split named twice were evaluated twice: weights and standard error wrong, without a word
        ({"evaluation_splits": ["test", "test"]}, r"evaluation_splits=\['test', 'test'\].*once"),
        ({"evaluation_splits": [1]}, "evaluation_splits=\\[1\\].*string"),
        ({"generation_size": "32", "metrics": [Metrics.exact_match]}, "generation_size='32'.*whole number"),
        ({"num_fewshots": -1}, "num_fewshots"),
        ({"hf_filter": 3}, "hf_filter"),
        ({"generation_size": 0, "metrics": [Metrics.exact_match]}, "generation_size=0 .*generative"),
        ({"generation_size": -5, "metrics": [Metrics.exact_match]}, "generation_size=-5"),
        # an empty stop string is in every text: each generation stopped after its first token, scored as valid
        ({"stop_sequence": ["\n", ""]}, "stop_sequence .* holds ''"),
        ({"stop_sequence": [None]}, "holds None"),  # a TypeError in the middle of generation
        ({"must_remove_duplicate_docs": "false"}, "must_remove_duplicate_docs='false'.*True or False"),  # truthy
        ({"truncate_fewshots": 1}, "truncate_fewshots=1.*True or False"),
        ({"num_fewshots": True}, "num_fewshots=True.*integer"),  # was 1
        ({"version": "1"}, "version='1'.*integer"),
    ],
)
def test_invalid_configs_raise(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        make(**overrides)


def test_as_dict_names_callables_and_metrics():
    class M:
        metric_name = "acc"
        category = SamplingMethod.LOGPROBS

    data = make(metrics=[M()], hf_filter=lambda row: True).as_dict()
    json.dumps(data)
    assert data["metrics"] == ["acc"]
    assert data["prompt_function"] == "prompt"
    assert data["full_name"] == "custom|t|0"


def test_two_metrics_with_the_same_result_key_are_rejected():
    from lighteval_nanotron.errors import ConfigError
    from lighteval_nanotron.metrics import LogProbCharNorm, LogProbTokenNorm, Metrics
    from lighteval_nanotron.tasks import LightevalTaskConfig

    char = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})
    token = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbTokenNorm()})
    with pytest.raises(ConfigError, match="acc_with_logprob_normalization"):
        LightevalTaskConfig(
            name="t", prompt_function=lambda line, task_name: None, hf_repo="r", hf_subset="s", metrics=[char, token]
        )
