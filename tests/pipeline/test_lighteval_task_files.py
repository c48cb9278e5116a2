"""Task files written for lighteval 0.11 and 0.13 run unchanged: adapted at registry time, lighteval's own
metric code on this project's model answers, the same results as the same tasks written for this project."""

import dataclasses
import logging
import math
import random
import sys
import types
from pathlib import Path

import helpers_pipeline
import pytest
from helpers_pipeline import BigramLM

from lighteval_nanotron.errors import ConfigError, CustomTasksError, PromptFunctionError
from lighteval_nanotron.metrics import (
    LogProbCharNorm,
    LogProbPMINorm,
    LogProbTokenNorm,
    Metrics,
    aggregate_task_metrics,
)
from lighteval_nanotron.metrics.normalizations import helm_normalizer
from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
from lighteval_nanotron.requests import ModelResponse
from lighteval_nanotron.tasks import Doc, LightevalTaskConfig, Registry

HERE = Path(__file__).parent
V011, V013 = HERE / "lighteval_toy_tasks.py", HERE / "lighteval013_toy_tasks.py"
MC, GEN, PPL, PMI = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0", "custom|toy_pmi|0"
SKIP = "custom|toy_mc_skip|0"
LIGHTEVAL_ONLY = "custom|toy_gen_lighteval_metrics|0"


def _lighteval():
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks.lighteval_adapter import import_lighteval

    return import_lighteval()


def _has_inspect_fields(lighteval) -> bool:
    """lighteval 0.12+ (a lighteval 0.13 file uses them)."""
    return "sample_fields" in {field.name for field in dataclasses.fields(lighteval.lighteval_task.LightevalTaskConfig)}


def _results(custom_tasks, tasks: str) -> dict:
    return (
        EvaluationPipeline.prepare(BigramLM(), tasks, PipelineSettings(custom_tasks=custom_tasks)).run(step=1).results
    )


def _skipping_prompt(line: dict, task_name: str) -> Doc | None:
    return None if line["question"] == "efg" else helpers_pipeline.mc_prompt(line, task_name)


def _our_twin() -> types.ModuleType:
    """The toy files written against this project: helpers_pipeline's tasks with the same metrics."""
    char_norm = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})
    table = {config.name: config for config in helpers_pipeline.TASKS_TABLE}
    module = types.ModuleType("our_toy_tasks")
    module.TASKS_TABLE = [
        dataclasses.replace(table["toy_mc"], metrics=[Metrics.loglikelihood_acc, char_norm]),
        table["toy_gen"],
        table["toy_ppl"],
        table["toy_pmi"],
        dataclasses.replace(table["toy_mc"], name="toy_mc_skip", prompt_function=_skipping_prompt),
    ]
    return module


def _normalized_key(results: dict, prefix: str) -> str:
    """The result key of an `acc` with a log-prob normalization: lighteval 0.11 names it
    `acc_with_logprob_normalization`, 0.12+ `acc:logprob_normalization=<the normalization>`."""
    suffixes = ("_stderr", "_centered")
    (key,) = [k for k in results if k.startswith(prefix) and "logprob_normalization" in k and not k.endswith(suffixes)]
    return key


def _same(theirs: dict, ours: dict, their_key: str, our_key: str) -> None:
    assert theirs[their_key] == pytest.approx(ours[our_key], rel=1e-12)
    assert theirs[their_key + "_stderr"] == pytest.approx(ours[our_key + "_stderr"], rel=1e-12)


@pytest.mark.parametrize("task_file", [V011, V013], ids=["lighteval-0.11-file", "lighteval-0.13-file"])
def test_lighteval_task_files_give_the_same_results_as_ours(toy_data, task_file):
    if task_file == V013 and not _has_inspect_fields(_lighteval()):
        pytest.skip("a lighteval 0.13 file needs lighteval >= 0.12 (inspect-ai fields)")
    _lighteval()
    specs = [MC, GEN, PPL, PMI] + ([SKIP] if task_file == V013 else [])
    ours = _results(_our_twin(), ",".join(specs))
    theirs = _results(str(task_file), ",".join(specs))
    assert set(theirs) == set(ours)
    assert theirs[MC]["acc"] == ours[MC]["acc"] == 0.75
    _same(theirs[MC], ours[MC], _normalized_key(theirs[MC], "acc"), "acc_with_logprob_normalization")
    for key in ("em", "acc"):
        _same(theirs[GEN], ours[GEN], key, key)
    for key in ("word_perplexity", "bits_per_byte"):
        _same(theirs[PPL], ours[PPL], key, key)
    _same(theirs[PMI], ours[PMI], _normalized_key(theirs[PMI], "acc"), "acc_with_logprob_normalization")
    # lighteval's accuracy has this project's chance level: the same centered values
    for task, key in ((MC, "acc"), (PMI, _normalized_key(theirs[PMI], "acc"))):
        our_key = key if task == MC else "acc_with_logprob_normalization"
        _same(theirs[task], ours[task], key + "_centered", our_key + "_centered")
    if task_file == V013:  # the row its prompt function skips is not evaluated, as in ours
        assert theirs[SKIP] == ours[SKIP] and theirs[SKIP]["acc"] == 1.0


def test_lightevals_own_code_computes_metrics_we_do_not_have(toy_data):
    _lighteval()
    results = _results(str(V011), LIGHTEVAL_ONLY)[LIGHTEVAL_ONLY]
    # greedy bigram generations: "defghij" (gold defghij), "nop" (gold nop), "defghij" (gold xyz)
    (exact,) = [key for key in results if key.startswith("em") and not key.endswith("_stderr")]
    assert results[exact] == pytest.approx(2 / 3)
    assert results["rouge1"] == pytest.approx(2 / 3)


def _random_case(rng: random.Random, n_choices: int) -> tuple:
    choices = [" " + "".join(rng.choice("abcde") for _ in range(rng.randint(1, 6))) for _ in range(n_choices)]
    gold = rng.randrange(n_choices)
    doc = Doc(query="q" * rng.randint(1, 9), choices=choices, gold_index=gold, task_name="t", unconditioned_query="q")
    response = ModelResponse(
        logprobs=[-rng.uniform(0.1, 9) for _ in choices],
        unconditioned_logprobs=[-rng.uniform(0.1, 9) for _ in choices],
        argmax_logits_eq_gold=[rng.random() < 0.5 for _ in choices],
        output_tokens=[[1] * rng.randint(1, 4) for _ in choices],
        text=[rng.choice([choices[gold], choices[gold].upper() + " x", " zz", choices[gold] + " y"])],
    )
    return doc, response


def _pairs(lighteval) -> list:
    """(our built-in metric, lighteval's metric of the same definition) pairs."""
    theirs, norms = lighteval.metrics.Metrics, __import__("lighteval.metrics.normalizations").metrics.normalizations

    def acc(norm, their_norm):
        return (
            Metrics.loglikelihood_acc(sample_params={"logprob_normalization": norm}),
            theirs.loglikelihood_acc(sample_params={"logprob_normalization": their_norm}),
        )

    helm = {"normalize_gold": helm_normalizer, "normalize_pred": helm_normalizer}
    their_helm = {"normalize_gold": norms.helm_normalizer, "normalize_pred": norms.helm_normalizer}
    # Not here, as they differ: lighteval's acc_golds_likelihood is 1 when greedy decoding reproduces any
    # choice (ours: a gold choice); its prediction_perplexity and target_perplexity count words (ours: tokens).
    same_name = ["loglikelihood_acc", "mrr", "recall_at_k", "mcc", "exact_match", "f1_score"]
    same_name += ["word_perplexity", "byte_perplexity", "bits_per_byte"]
    return [
        *((Metrics[name], theirs[name].value) for name in same_name),
        acc(LogProbCharNorm(), norms.LogProbCharNorm()),
        acc(LogProbCharNorm(ignore_first_space=True), norms.LogProbCharNorm(ignore_first_space=True)),
        acc(LogProbTokenNorm(), norms.LogProbTokenNorm()),
        acc(LogProbPMINorm(), norms.LogProbPMINorm()),
        (Metrics.exact_match(sample_params=helm), theirs.exact_match(sample_params=their_helm)),
        (Metrics.prefix_exact_match, theirs.exact_match(sample_params={"type_exact_match": "prefix"})),
    ]


def test_our_builtin_metrics_equal_lightevals_on_random_answers():
    """Each built-in metric here gives lighteval's value (run by its own code through the adapter);
    PMI reads the unconditioned log-probabilities where lighteval's metrics expect them."""
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    rng = random.Random(0)
    cases = [_random_case(rng, rng.randint(2, 5)) for _ in range(40)]
    perplexity_cases = [
        (Doc(query=" ".join("ab" * rng.randint(1, 4) for _ in range(rng.randint(1, 5))), choices=[], gold_index=0),
         ModelResponse(logprobs=[-rng.uniform(1, 30)], output_tokens=[[1, 2, 3]]))
        for _ in range(10)
    ]  # fmt: skip
    for ours, reference in _pairs(lighteval):
        theirs = lighteval_adapter.adapt_metric(reference, "test")
        assert isinstance(theirs.sample_level_fn, lighteval_adapter.LightevalSampleFn)
        assert theirs.requires_unconditioned_logprobs == ours.requires_unconditioned_logprobs
        docs = perplexity_cases if ours.category.value == "PERPLEXITY" else cases
        values = []
        for metric in (ours, theirs):
            samples = [metric.compute_sample(doc, response) for doc, response in docs]
            values.append(aggregate_task_metrics([metric], samples)[metric.metric_name])
        assert values[1] == pytest.approx(values[0], rel=1e-9), reference.metric_name


def test_lighteval_sampling_metrics_ask_for_their_samples():
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    members = lighteval.metrics.Metrics.__members__
    majority = members["maj_at_n"] if "maj_at_n" in members else members["maj_at_k"]  # 0.12 renamed it
    parameter = "n" if "maj_at_n" in members else "k"
    metric = lighteval_adapter.adapt_metric(majority(sample_params={parameter: 4}), "test")
    assert metric.sample_level_fn.num_samples == 4
    if lighteval.version.release[:2] == (0, 12):
        return  # lighteval 0.12's MajAtN passes its scorer the response and the doc swapped: it raises there too
    doc = Doc(query="q", choices=[" a"], gold_index=0)
    answers = ModelResponse(text=[" a", " b", " a", " c"])
    assert metric.compute_sample(doc, answers)[metric.metric_name] == 1


def test_metrics_needing_a_judge_or_a_scoring_model_are_refused_by_name():
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    with pytest.raises(ConfigError, match="'bleurt' cannot run here"):
        lighteval_adapter.adapt_metric(lighteval.metrics.Metrics.bleurt, "task x")
    with pytest.raises(ConfigError, match="cannot run here: .*LLM judge"):
        lighteval_adapter.adapt_metric(lighteval.metrics.Metrics.simpleqa_judge, "task x")


def test_a_metric_lighteval_cannot_compute_is_refused_when_the_task_is_built():
    """A metric built with lighteval's classes around a plain function: lighteval 0.13 raises 'Incorrect type'
    only when scoring; here it failed its task after the whole evaluation, blaming the prompt function."""
    lighteval = _lighteval()
    if not hasattr(lighteval.metric_utils, "SampleLevelComputation"):
        pytest.skip("this lighteval's metrics take plain functions")
    from lighteval_nanotron.tasks import lighteval_adapter

    metric = lighteval.metric_utils.SampleLevelMetric(
        metric_name="mine", higher_is_better=True, category=lighteval.requests.SamplingMethod.LOGPROBS,
        sample_level_fn=lambda doc, model_response: 1.0, corpus_level_fn=sum,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"task x: .*'mine': .*sample_level_fn"):
        lighteval_adapter.adapt_metric(metric, "task x")


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "task_file.py"
    header = (
        "from lighteval.metrics.metrics import Metrics\n"
        "from lighteval.tasks.lighteval_task import LightevalTaskConfig\n"
        "from lighteval.tasks.requests import Doc\n\n"
        "def prompt(line, task_name):\n"
        "    return Doc(query=line['question'], choices=line['choices'], gold_index=line['gold'])\n\n"
    )
    path.write_text(header + body)
    return path


def test_a_lighteval_010_file_is_refused_naming_the_change(toy_data, tmp_path):
    _lighteval()
    path = _write(
        tmp_path,
        "TASKS_TABLE = [LightevalTaskConfig(name='t', prompt_function=prompt, hf_repo='toy', hf_subset='mc',\n"
        "    metric=[Metrics.loglikelihood_acc], suite=['custom'])]\n",
    )
    with pytest.raises(CustomTasksError) as error:
        Registry("custom|t|0", custom_tasks=path)
    message = str(error.value)
    assert "\n" not in message and "written for lighteval 0.10" in message and "rename metric= to metrics=" in message


def test_a_config_only_for_inspect_ai_is_refused_and_unknown_fields_too(toy_data, tmp_path):
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    base = lighteval.lighteval_task.LightevalTaskConfig
    config = base(name="t", prompt_function=None, hf_repo="toy", hf_subset="mc", metrics=[])
    with pytest.raises(ConfigError, match="no prompt_function: .*inspect-ai"):
        lighteval_adapter.adapt_task_config(config)
    later = dataclasses.make_dataclass("LightevalTaskConfig", [("new_field", int, 0)], bases=(base,))
    config = later(name="t", prompt_function=helpers_pipeline.mc_prompt, hf_repo="toy", hf_subset="mc", metrics=[])
    assert lighteval_adapter.adapt_task_config(config).name == "t"  # at its default: nothing changes
    config.new_field = 3
    with pytest.raises(ConfigError, match=r"new_field .*no counterpart"):
        lighteval_adapter.adapt_task_config(config)


def test_hf_data_files_loads_the_files_given(toy_data, tmp_path):
    """lighteval's `hf_data_files` (after 0.13): copied by name, loaded by `datasets` from those files."""
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    rows = tmp_path / "rows.jsonl"
    rows.write_text((toy_data / "toy" / "mc" / "test.jsonl").read_text())
    with_files = dataclasses.make_dataclass(
        "LightevalTaskConfig", [("hf_data_files", object, None)], bases=(lighteval.lighteval_task.LightevalTaskConfig,)
    )
    theirs = with_files(
        name="from_files", prompt_function=helpers_pipeline.mc_prompt, hf_repo="json", hf_subset="default",
        hf_data_files={"test": str(rows)}, evaluation_splits=["test"],
        metrics=[lighteval.metrics.Metrics.loglikelihood_acc],
    )  # fmt: skip
    config = lighteval_adapter.adapt_task_config(theirs)
    assert config.hf_data_files == {"test": str(rows)}
    native = LightevalTaskConfig(
        name="from_files", prompt_function=helpers_pipeline.mc_prompt, hf_repo="json", hf_subset="default",
        hf_data_files=str(rows), evaluation_splits=["train"], metrics=[Metrics.loglikelihood_acc],
    )  # fmt: skip
    for task_config in (config, native):
        module = types.ModuleType("from_files_tasks")
        module.TASKS_TABLE = [task_config]
        assert _results(module, "custom|from_files|0")["custom|from_files|0"]["acc"] == 0.75


def test_inspect_ai_fields_are_ignored_with_one_note(toy_data, caplog):
    if not _has_inspect_fields(_lighteval()):
        pytest.skip("inspect-ai fields exist from lighteval 0.12 on")
    with caplog.at_level(logging.WARNING):
        Registry(MC, custom_tasks=str(V013))
    (note,) = [record.getMessage() for record in caplog.records if "inspect-ai" in record.getMessage()]
    assert "field(s) filter, sample_fields are ignored (tasks toy_mc, toy_mc_skip)" in note


def test_without_lighteval_a_lighteval_task_file_fails_naming_the_extra(toy_data, monkeypatch, tmp_path):
    task_file = tmp_path / V011.name  # not imported yet in this process
    task_file.write_text(V011.read_text())
    for name in [name for name in sys.modules if name == "lighteval" or name.startswith("lighteval.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "lighteval", None)  # what an environment without it sees
    with pytest.raises(CustomTasksError) as error:
        Registry(MC, custom_tasks=str(task_file))
    message = str(error.value)
    assert "\n" not in message and "lighteval-nanotron[lighteval]" in message and "lighteval_toy_tasks.py" in message


def _response(logprobs: list) -> ModelResponse:
    return ModelResponse(logprobs=logprobs, output_tokens=[[1], [2]], argmax_logits_eq_gold=[True, False])


def test_target_perplexity_is_lightevals():
    """lighteval's target_perplexity runs as lighteval's code computes it (0.13: exp(-mean over docs of the
    summed log-probabilities of every choice), not this project's definition."""
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    metric = lighteval_adapter.adapt_metric(lighteval.metrics.Metrics.target_perplexity, "test")
    docs = [
        (Doc(query="q", choices=[" a b", " c"], gold_index=0), _response([-2.0, -1.0])),
        (Doc(query="q", choices=[" d", " e f g"], gold_index=1), _response([-1.0, -4.0])),
    ]
    samples = [metric.compute_sample(doc, response) for doc, response in docs]
    value = aggregate_task_metrics([metric], samples)["ppl"]
    assert value == pytest.approx(math.exp(4.0))  # -(-2 - 1 - 1 - 4) / 2 docs


def test_a_doc_with_images_is_refused_naming_the_row(toy_data, tmp_path):
    """A multimodal task (lighteval's `Doc(images=...)`, as its mmmu_pro tasks) is refused when its docs are
    built, lighteval files and this project's alike: it was scored on its text alone, without a word."""
    _lighteval()
    path = _write(
        tmp_path,
        "def with_image(line, task_name):\n"
        "    doc = prompt(line, task_name)\n"
        "    doc.images = [object()] if line['gold'] == 1 else None\n"
        "    return doc\n\n"
        "TASKS_TABLE = [LightevalTaskConfig(name='t', prompt_function=with_image, hf_repo='toy', hf_subset='mc',\n"
        "    metrics=[Metrics.loglikelihood_acc], evaluation_splits=['test'])]\n",
    )
    with pytest.raises(PromptFunctionError, match=r"images on row 1 .*'test': .*multimodal") as error:
        _results(str(path), "custom|t|0")
    assert "\n" not in str(error.value)
    native = types.ModuleType("native_images")
    native.TASKS_TABLE = [
        LightevalTaskConfig(
            name="t", prompt_function=lambda line, name: Doc(query="q", choices=[" a"], gold_index=0, images=[b"png"]),
            hf_repo="toy", hf_subset="mc", metrics=[Metrics.loglikelihood_acc], evaluation_splits=["test"],
        )
    ]  # fmt: skip
    with pytest.raises(PromptFunctionError, match="images on row 0"):
        _results(native, "custom|t|0")


def test_a_config_listing_no_splits_draws_few_shots_where_lighteval_does(toy_data, tmp_path):
    """`hf_avail_splits=[]`: lighteval takes the few-shot examples from the evaluation split; the adapter
    put lighteval's default list back, so `train` (a split the file never named) became the pool."""
    lighteval = _lighteval()
    from lighteval_nanotron.tasks import lighteval_adapter

    theirs = lighteval.lighteval_task.LightevalTaskConfig(
        name="t", prompt_function=helpers_pipeline.mc_prompt, hf_repo="toy", hf_subset="mc",
        hf_avail_splits=[], evaluation_splits=["test"], metrics=[lighteval.metrics.Metrics.loglikelihood_acc],
    )  # fmt: skip
    module = types.ModuleType("no_splits_listed")
    module.TASKS_TABLE = [lighteval_adapter.adapt_task_config(theirs)]
    (task,) = Registry("custom|t|1", custom_tasks=module).load_tasks().values()
    assert task.fewshot_split == lighteval.lighteval_task.LightevalTask(theirs).fewshot_split is None
    assert all(len(doc.fewshot_samples) == 1 for doc in task.get_docs())  # drawn from `test`


def test_an_empty_instruction_renders_as_lightevals_prompt_manager_renders_it():
    """lighteval's `instruction=""` (its ifeval, ifbench, French and Arabic tasks) is a part of the prompt that
    strips the query; the adapter made it None, so the prompt kept the query's trailing space and lost the
    leading blank part: other tokens than lighteval's, other scores."""
    lighteval = _lighteval()
    from lighteval.tasks.prompt_manager import PromptManager as LightevalPromptManager

    from lighteval_nanotron.tasks import PromptManager
    from lighteval_nanotron.tasks.lighteval_adapter import adapt_doc

    def doc(query: str, gold: int):
        return lighteval.requests.Doc(query=query, choices=[" yes", " no"], gold_index=gold, instruction="")

    theirs = doc("Premise: a cat. Question: is it? ", 0)
    theirs.fewshot_samples = [doc("Premise: b. Question: ok? ", 1)]
    ours = adapt_doc(theirs)
    ours.fewshot_samples = [adapt_doc(example) for example in theirs.fewshot_samples]
    expected = LightevalPromptManager().prepare_prompt(theirs)
    assert (
        PromptManager().prepare_prompt(ours)
        == expected
        == "\n\nPremise: b. Question: ok? no\n\nPremise: a cat. Question: is it?"
    )


def test_lightevals_metrics_in_this_projects_config_are_computed_by_lighteval(toy_data):
    """A lighteval user's half-migrated file: this project's LightevalTaskConfig with lighteval's `Metrics`
    and `Doc`. It failed to import, explained as a lighteval 0.10 metric name ('Metrics' object has no
    attribute 'metric_name'), and a prompt returning lighteval's Doc was told it 'must return a Doc'; both
    are now adapted as in a lighteval task file."""
    lighteval = _lighteval()

    def their_doc(line: dict, task_name: str):
        return lighteval.requests.Doc(query=line["question"], choices=line["choices"], gold_index=line["gold"])

    module = types.ModuleType("half_migrated")
    (config,) = [c for c in helpers_pipeline.TASKS_TABLE if c.name == "toy_mc"]
    metrics = [lighteval.metrics.Metrics.loglikelihood_acc]
    module.TASKS_TABLE = [dataclasses.replace(config, metrics=metrics, prompt_function=their_doc)]
    theirs = _results(module, MC)[MC]
    assert theirs["acc"] == _results(helpers_pipeline, MC)[MC]["acc"] == 0.75
