import json
import math
import statistics

import helpers_pipeline
import pytest
from helpers_pipeline import ALL_TOY_TASKS, PPL_ROWS, BigramLM, PlanningBigramLM

from lighteval_nanotron.errors import ConfigError, EvaluationError, UnknownTaskError
from lighteval_nanotron.pipeline import EvaluationPipeline, EvaluationResult, PipelineSettings

MC, GEN, PPL, PMI = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0", "custom|toy_pmi|0"


def _prepare(model, tasks=ALL_TOY_TASKS, **kwargs) -> EvaluationPipeline:
    return EvaluationPipeline.prepare(model, tasks, PipelineSettings(custom_tasks=helpers_pipeline, **kwargs))


def test_scores_of_all_three_sampling_methods(toy_data):
    model = BigramLM()
    result = _prepare(model).run(step=10, consumed_tokens=1000)

    assert isinstance(result, EvaluationResult)
    assert list(result.results) == [MC, GEN, PPL, PMI, "all"]
    # LOGPROBS: the bigram table prefers the gold choice on 3 of 4 docs
    assert result.results[MC]["acc"] == 0.75
    assert result.results[MC]["acc_stderr"] == pytest.approx(statistics.stdev([1, 1, 1, 0]) / 2)
    # GENERATIVE: greedy continuation matches the answer on 2 of 3 docs
    assert result.results[GEN]["em"] == pytest.approx(2 / 3)
    # PERPLEXITY: word perplexity over the corpus of texts, from the model's own log-probs
    total = sum(model.score([], model.tokenizer.encode(row["text"]))[0] for row in PPL_ROWS)
    words = sum(len(row["text"].split()) for row in PPL_ROWS)
    num_bytes = sum(len(row["text"].encode()) for row in PPL_ROWS)
    assert result.results[PPL]["word_perplexity"] == pytest.approx(math.exp(-total / words))
    assert result.results[PPL]["bits_per_byte"] == pytest.approx(-total / num_bytes / math.log(2))
    assert result.results[PPL]["bits_per_byte_stderr"] > 0
    # the cross-task average, metric by metric
    assert result.results["all"]["acc"] == pytest.approx((0.75 + 1.0) / 2)
    assert result.results["all"]["em"] == pytest.approx(2 / 3)
    assert model.calls == ["loglikelihood", "loglikelihood", "loglikelihood_rolling", "greedy_until"]


def test_every_task_gets_its_cost_in_json_table_and_scalars(toy_data):
    from lighteval_nanotron.tracking import format_results_table, result_scalars

    model = PlanningBigramLM()  # plans without per-doc counts of its own: counted from the responses
    result = _prepare(model).run(step=3)
    costs = json.loads(json.dumps(result.to_dict()))["task_costs"]
    assert list(costs) == [MC, GEN, PPL, PMI]
    assert {task: cost["docs"] for task, cost in costs.items()} == {MC: 4, GEN: 3, PPL: 3, PMI: 4}  # GEN: 2 methods
    assert sum(cost["seconds"] for cost in costs.values()) <= result.wall_time_s
    for cost in costs.values():
        assert cost["seconds"] > 0 and cost["docs_per_s"] == pytest.approx(cost["docs"] / cost["seconds"])
        assert cost["processed_tokens"] >= cost["useful_tokens"] > 0
    assert costs[PPL]["useful_tokens"] == sum(len(model.tokenizer.encode(row["text"])) for row in PPL_ROWS)
    table = format_results_table(result)
    assert "| suite_score" in table.split("\n\n")[0]  # the centered suite score has its rows
    assert "| Task" in table.split("\n\n")[1] and f"{costs[GEN]['seconds']:.2f}" in table.split("\n\n")[1]
    scalars = result_scalars(result)
    assert {tag: value for tag, value in scalars.items() if tag.startswith("eval_time/")} == {
        f"eval_time/{task}": cost["seconds"] for task, cost in costs.items()
    }


def test_fewshot_draws_for_every_task_are_recorded(toy_data):
    result = _prepare(BigramLM(), max_samples=2, fewshot_draws="lighteval").run()
    records = [config["fewshot_sampling"] for config in result.to_dict()["config_tasks"].values()]
    assert len(records) == 4
    assert all(r["draws"] == "lighteval" and r["same_draws_as"] == "lighteval==0.11" for r in records)
    with pytest.raises(ConfigError, match="fewshot_draws='lighteval-0.11'.*lighteval, per_doc"):
        _prepare(BigramLM(), fewshot_draws="lighteval-0.11")


def test_results_dict_has_lighteval_layout(toy_data):
    result = _prepare(BigramLM(), max_samples=3).run(step=10, consumed_tokens=1000)
    content = json.loads(json.dumps(result.to_dict()))  # JSON-ready as is
    assert list(content) == [
        "config_general",
        "results",
        "versions",
        "config_tasks",
        "summary_tasks",
        "summary_general",
        "task_costs",
        "suite_score",
    ]
    general = content["config_general"]
    assert general["model_name"] == "toy-bigram"
    assert (general["training_step"], general["consumed_tokens"], general["max_samples"]) == (10, 1000, 3)
    assert general["wall_time_s"] >= 0 and general["end_time"] >= general["start_time"]
    assert content["versions"] == {MC: 0, GEN: 0, PPL: 0, PMI: 0}
    assert content["config_tasks"][GEN]["metrics"] == ["em", "acc"]
    # each result key's direction and chance level, for the signal analysis; GEN's one-choice docs
    # are always right (chance 1), so its accuracy gets no centered value
    assert content["config_tasks"][GEN]["higher_is_better"] == {"em": True, "acc": True}
    assert content["config_tasks"][GEN]["chance"] == {"acc": 1.0}
    assert content["config_tasks"][MC]["chance"] == {"acc": 0.5, "acc_centered": 0.0}
    assert content["results"][MC]["acc_centered"] == pytest.approx(2 * content["results"][MC]["acc"] - 1)
    assert "acc_centered" not in content["results"][GEN]
    centered = {"acc_centered", "acc_with_logprob_normalization_centered"}  # MC, and PMI's accuracy
    assert set(content["suite_score"]) == centered | {name + "_stderr" for name in centered}
    assert content["config_tasks"][GEN]["effective_num_docs"] == 3
    assert content["config_tasks"][GEN]["fewshot_sampling"] == {
        "draws": "per_doc",  # a custom task: per-doc draws unless asked
        "select": "balanced",
        "num_fewshots": 0,
        "seed": 0,
        "doc_shuffle_seed": 42,
    }
    summary = content["summary_tasks"][MC]
    assert summary["num_samples"] == 3 and summary["truncated"] == 0
    assert set(summary["hashes"]) == {"hash_examples", "hash_full_prompts", "hash_input_tokens", "hash_cont_tokens"}
    assert content["summary_general"]["num_samples"] == 3 + 6 + 3 + 3


def test_details_keep_prompt_choices_gold_outputs_and_sample_scores(toy_data):
    result = _prepare(BigramLM()).run()
    mc = result.details[MC]
    assert [d.full_prompt for d in mc] == [d.query for d in mc]
    wrong = [d for d in mc if d.metrics["acc"] == 0]
    assert len(wrong) == 1 and wrong[0].choices == ["h", "w"] and wrong[0].gold == ["w"]
    assert wrong[0].logprobs[0] > wrong[0].logprobs[1]
    assert all(d.unconditioned_logprobs is None for d in mc)
    assert all(d.unconditioned_logprobs is not None for d in result.details[PMI])
    # a doc asked two ways gives one row per way, next to each other
    gen = result.details[GEN]
    assert [d.sampling_method for d in gen] == ["LOGPROBS", "GENERATIVE"] * 3
    assert [d.doc_id for d in gen[::2]] == [d.doc_id for d in gen[1::2]]
    generated = sorted((d.predictions[0], d.gold[0], d.metrics["em"]) for d in gen[1::2])
    assert generated == [("defghij", "defghij", 1), ("defghij", "xyz", 0), ("nop", "nop", 1)]
    assert all(set(d.metrics) == {"em"} for d in gen[1::2])
    assert all(set(d.metrics) == {"acc"} for d in gen[::2])


def test_prepare_once_run_many_is_deterministic(toy_data):
    model = PlanningBigramLM()
    pipeline = _prepare(model)
    prepared = list(model.calls)
    first, second = pipeline.run(step=1), pipeline.run(step=2)

    assert prepared == ["prepare_loglikelihood", "prepare_loglikelihood", "prepare_rolling", "prepare_generation"]
    runs = model.calls[len(prepared) :]
    assert runs == ["run:choices", "run:choices", "run:rolling", "run:generation"] * 2
    assert first.results == second.results
    assert [d.doc_id for d in first.details[MC]] == [d.doc_id for d in second.details[MC]]
    # the PMI task got a LOGPROBS group of its own, planned with unconditioned scoring
    assert [(g.method.value, g.unconditioned, len(g.docs)) for g in pipeline.groups] == [
        ("LOGPROBS", False, 7),
        ("LOGPROBS", True, 4),
        ("PERPLEXITY", False, 3),
        ("GENERATIVE", False, 3),
    ]


def test_max_samples_takes_a_fixed_subset(toy_data):
    a = _prepare(BigramLM(), MC, max_samples=2).run()
    b = _prepare(BigramLM(), MC, max_samples=2).run()
    assert len(a.details[MC]) == 2
    assert [d.doc_id for d in a.details[MC]] == [d.doc_id for d in b.details[MC]]


class _SilentRank(BigramLM):
    is_reporting_rank = False


class _Lossy(BigramLM):
    def greedy_until(self, docs):
        return super().greedy_until(docs)[:-1]


class _NoPMI(BigramLM):
    supports_unconditioned = False

    def loglikelihood(self, docs):
        return super().loglikelihood(docs)


def test_only_the_reporting_rank_gets_a_result(toy_data):
    model = _SilentRank()
    assert _prepare(model).run(step=3) is None
    assert model.calls  # it still took part in every forward


def test_errors_are_named_and_raised_early(toy_data):
    with pytest.raises(UnknownTaskError):
        _prepare(BigramLM(), "custom|no_such_task|0")
    with pytest.raises(ConfigError, match="max_samples"):
        _prepare(BigramLM(), MC, max_samples=0)
    with pytest.raises(ConfigError, match="unconditioned"):
        _prepare(_NoPMI(), PMI)
    _prepare(_NoPMI(), MC)  # fine without a PMI metric
    with pytest.raises(EvaluationError, match="2 GENERATIVE responses for 3 requests"):
        _prepare(_Lossy(), GEN).run()


def test_model_seconds_are_split_by_token_positions_and_add_up():
    from lighteval_nanotron.pipeline.model_calls import GroupRun
    from lighteval_nanotron.pipeline.request_groups import RequestGroup
    from lighteval_nanotron.pipeline.task_costs import task_costs
    from lighteval_nanotron.requests import SamplingMethod

    scoring = RequestGroup(SamplingMethod.LOGPROBS, task_names=["a", "b", "a", "b"])
    generation = RequestGroup(SamplingMethod.GENERATIVE, task_names=["b", "c"])
    runs = [GroupRun([], 2.0, [10.0, 30.0, 10.0, 30.0], [8, 20, 8, 20]), GroupRun([], 3.0, [5.0, 10.0], [5, 9])]
    costs = task_costs([scoring, generation], runs, {"a": 2, "b": 3, "c": 1})
    assert sum(cost.seconds for cost in costs.values()) == pytest.approx(5.0)
    assert costs["a"].seconds == pytest.approx(0.5) and costs["c"].seconds == pytest.approx(2.0)
    assert costs["b"].seconds == pytest.approx(1.5 + 1.0) and costs["b"].docs_per_s == pytest.approx(3 / 2.5)
    assert (costs["b"].processed_tokens, costs["b"].useful_tokens) == (65, 45)


def test_every_task_records_its_data_source_and_an_unmet_cap_is_said(toy_data, caplog):
    result = _prepare(BigramLM(), max_samples=4).run()
    sources = {task: config["data_source"] for task, config in result.to_dict()["config_tasks"].items()}
    for task, source in sources.items():
        assert source["kind"] == "data_dir" and source["location"].startswith(str(toy_data)) and not source["slice"]
        assert source["docs_available"] == result.to_dict()["config_tasks"][task]["original_num_docs"]
        assert source["max_samples"] == 4 and source["docs_evaluated"] == min(4, source["docs_available"])
        assert source["cap_met"] == (source["docs_available"] >= 4)
    assert sources[MC]["rows"] == {"test": 4} and sources[MC]["cap_met"]
    assert sources[GEN]["rows"] == {"test": 3} and not sources[GEN]["cap_met"]
    notes = [r.getMessage() for r in caplog.records if "max_samples 4 asked" in r.getMessage()]
    assert notes == [
        f"Task {GEN}: max_samples 4 asked for, but a data dir holds 3 docs (3 rows of test): all 3 are evaluated.",
        f"Task {PPL}: max_samples 4 asked for, but a data dir holds 3 docs (3 rows of test): all 3 are evaluated.",
    ]
    unlimited = _prepare(BigramLM()).run().to_dict()["config_tasks"][MC]["data_source"]
    assert unlimited["max_samples"] is None and unlimited["cap_met"]
