"""lighteval's own task objects mapped onto this project's, at registry time.

The one module that imports lighteval (the optional extra `lighteval-nanotron[lighteval]`). A task
file written for lighteval (`TASKS_TABLE` of lighteval `LightevalTaskConfig`s, prompt functions
returning lighteval `Doc`s, lighteval `Metrics`) is turned into this project's types here:

- config fields are copied by name (`metric`, lighteval 0.10's name, and `metrics` both work);
- each prompt function is wrapped so that it returns this project's `Doc`;
- each metric maps by its lighteval name onto the same metric here, keeping lighteval's result key
  (`acc_norm`, `qem`, ...); a metric with no counterpart here runs through lighteval's own
  implementation on this project's model responses, and one that cannot (sampling, LLM judges,
  metrics lighteval itself ignores) is refused with its name.

Written against lighteval 0.10 (the newest release that allows numpy<2, which Nanotron 0.4 needs).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from lighteval_nanotron.errors import ConfigError, CustomTasksError
from lighteval_nanotron.metrics import LogProbCharNorm, Metrics
from lighteval_nanotron.metrics.metric import (
    CorpusLevelMetric,
    CorpusLevelMetricGrouping,
    Metric,
    SampleLevelMetric,
    SampleLevelMetricGrouping,
)
from lighteval_nanotron.requests import Doc, ModelResponse, SamplingMethod
from lighteval_nanotron.tasks.config import LightevalTaskConfig

INSTALL_HINT = "pip install 'lighteval-nanotron[lighteval]'"


def import_lighteval() -> Any:
    """lighteval's task and metric modules, or one clear error naming the extra to install."""
    try:
        from lighteval.metrics import metrics as lighteval_metrics
        from lighteval.metrics.utils import metric_utils
        from lighteval.tasks import lighteval_task, requests
    except ImportError as error:
        raise CustomTasksError(f"lighteval is not installed ({error}); install it with: {INSTALL_HINT}") from error
    return lighteval_metrics, metric_utils, lighteval_task, requests


def is_lighteval_object(obj: Any) -> bool:
    """True for an object of lighteval's own classes (checked without importing lighteval)."""
    return type(obj).__module__.split(".", 1)[0] == "lighteval"


# ----- metrics -----


def _char_norm(ignore_first_space: bool) -> Metric:
    return Metrics.loglikelihood_acc(
        sample_params={"logprob_normalization": LogProbCharNorm(ignore_first_space=ignore_first_space)}
    )


# lighteval `Metrics` member name -> the metric here computing the same value (checked against
# lighteval's implementation in tests/tasks/test_lighteval_adapter.py).
_SAME_METRIC: dict[str, Callable[[], Metric]] = {
    "loglikelihood_acc": lambda: Metrics.loglikelihood_acc,
    "loglikelihood_acc_single_token": lambda: Metrics.loglikelihood_acc,
    "loglikelihood_acc_norm": lambda: _char_norm(False),
    "loglikelihood_acc_norm_single_token": lambda: _char_norm(False),
    "loglikelihood_acc_norm_nospace": lambda: _char_norm(True),
    "acc_golds_likelihood": lambda: Metrics.acc_golds_likelihood,
    "mrr": lambda: Metrics.mrr,
    "mrr_single_token": lambda: Metrics.mrr,
    "recall_at_1": lambda: Metrics.recall_at_1,
    "recall_at_1_single_token": lambda: Metrics.recall_at_1,
    "recall_at_2": lambda: Metrics.recall_at_2,
    "recall_at_2_single_token": lambda: Metrics.recall_at_2,
    "mcc": lambda: Metrics.mcc,
    "mcc_single_token": lambda: Metrics.mcc,
    "exact_match": lambda: Metrics.exact_match,
    "quasi_exact_match": lambda: Metrics.quasi_exact_match,
    "prefix_exact_match": lambda: Metrics.prefix_exact_match,
    "prefix_quasi_exact_match": lambda: Metrics.prefix_quasi_exact_match,
    "quasi_exact_match_gsm8k": lambda: Metrics.gsm8k_exact_match,
    "f1_score": lambda: Metrics.f1_score,
    "word_perplexity": lambda: Metrics.word_perplexity,
    "byte_perplexity": lambda: Metrics.byte_perplexity,
    "bits_per_byte": lambda: Metrics.bits_per_byte,
}

# lighteval category name -> the sampling method its inputs come from here.
_CATEGORY = {
    "GENERATIVE": SamplingMethod.GENERATIVE,
    "MULTICHOICE": SamplingMethod.LOGPROBS,
    "MULTICHOICE_ONE_TOKEN": SamplingMethod.LOGPROBS,
    "MULTICHOICE_PMI": SamplingMethod.LOGPROBS,
    "TARGET_PERPLEXITY": SamplingMethod.LOGPROBS,
    "PERPLEXITY": SamplingMethod.PERPLEXITY,
}


def lighteval_metric_name(metric: Any) -> str | None:
    """The `Metrics` member name of a lighteval metric object (None for a user-built one)."""
    lighteval_metrics = import_lighteval()[0]
    value = getattr(metric, "value", metric)
    return next((member.name for member in lighteval_metrics.Metrics if member.value is value), None)


def to_lighteval_doc(doc: Doc) -> Any:
    """This project's `Doc` as lighteval's, for lighteval's metric implementations."""
    requests = import_lighteval()[3]
    return requests.Doc(
        query=doc.query,
        choices=list(doc.choices),
        gold_index=doc.gold_index,
        original_query=doc.original_query or "",
        specific=doc.specific,
        task_name=doc.task_name,
        instruction=doc.instruction or "",
        fewshot_sorting_class=doc.fewshot_sorting_class,
        unconditioned_query=doc.unconditioned_query,
    )


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@dataclasses.dataclass(frozen=True)
class LightevalSampleFn:
    """Runs a lighteval metric's own sample-level function on this project's model response.

    The inputs are the ones lighteval's `apply_*_metric` functions pass for the metric's category.
    """

    metric: Any
    category: str

    @property
    def requires_unconditioned_logprobs(self) -> bool:
        return self.category == "MULTICHOICE_PMI"

    def __call__(self, doc: Doc, model_response: ModelResponse) -> Any:
        formatted_doc = to_lighteval_doc(doc)
        if self.category == "GENERATIVE":
            inputs = {
                "golds": doc.get_golds(),
                "predictions": list(model_response.text),
                "formatted_doc": formatted_doc,
            }
        elif self.category in ("MULTICHOICE", "MULTICHOICE_PMI"):
            inputs = {
                "gold_ixs": _as_list(doc.gold_index),
                "choices_logprob": list(model_response.logprobs),
                "unconditioned_logprob": model_response.unconditioned_logprobs,
                "choices_tokens": list(model_response.output_tokens),
                "formatted_doc": formatted_doc,
            }
        elif self.category == "MULTICHOICE_ONE_TOKEN":
            inputs = {
                "gold_ixs": _as_list(doc.gold_index),
                "choices_logprob": list(model_response.logprobs),
                "unconditioned_logprob": None,
                "choices_tokens": None,
                "formatted_doc": formatted_doc,
            }
        elif self.category == "TARGET_PERPLEXITY":
            golds = _as_list(doc.gold_index)
            inputs = {
                "logprobs": [model_response.logprobs[i] for i in golds],
                "argmax_logits_eq_gold_list": [model_response.argmax_logits_eq_gold[i] for i in golds],
                "reference_texts": doc.get_golds(),
                "target_tokens": [model_response.output_tokens[i] for i in golds],
            }
        else:  # PERPLEXITY
            reference = doc.original_query if doc.original_query not in (None, "") else doc.query
            inputs = {"logprobs": [model_response.logprobs[0]], "reference_texts": [reference]}
        values = self.metric.compute(**inputs)
        if isinstance(self.metric.metric_name, list):
            return values
        return values[self.metric.metric_name]


def _through_lighteval(metric: Any, name: str, where: str) -> Metric:
    category = metric.category.name
    if category not in _CATEGORY:
        raise ConfigError(
            f"{where}: lighteval metric {name!r} (category {category}) cannot run here: only metrics scored on "
            f"log-probabilities, greedy generations or perplexities do ({', '.join(_CATEGORY)})."
        )
    fn = LightevalSampleFn(metric=metric, category=category)
    grouping = isinstance(metric.metric_name, list)
    corpus_level = type(metric).__name__.startswith("Corpus")
    cls = {
        (False, False): SampleLevelMetric,
        (False, True): CorpusLevelMetric,
        (True, False): SampleLevelMetricGrouping,
        (True, True): CorpusLevelMetricGrouping,
    }[(grouping, corpus_level)]
    return cls(
        metric_name=metric.metric_name,
        higher_is_better=metric.higher_is_better,
        category=_CATEGORY[category],
        sample_level_fn=fn,
        corpus_level_fn=metric.corpus_level_fn,
    )


def adapt_metric(metric: Any, where: str) -> Metric:
    """A lighteval metric as this project's, under lighteval's result key."""
    if isinstance(metric, Metric):
        return metric
    metric = getattr(metric, "value", metric)
    name = lighteval_metric_name(metric) or str(metric.metric_name)
    if name in _SAME_METRIC:
        return dataclasses.replace(_SAME_METRIC[name](), metric_name=metric.metric_name)
    return _through_lighteval(metric, name, where)


# ----- docs and prompt functions -----

_DOC_FIELDS = (
    "query",
    "choices",
    "gold_index",
    "instruction",
    "images",
    "specific",
    "unconditioned_query",
    "original_query",
    "fewshot_sorting_class",
)


def adapt_doc(doc: Any) -> Doc | None:
    """A lighteval `Doc` as this project's (None stays None: the row is dropped)."""
    if doc is None or isinstance(doc, Doc):
        return doc
    values = {name: getattr(doc, name, None) for name in _DOC_FIELDS}
    values["instruction"] = values["instruction"] or None
    values["original_query"] = values["original_query"] or None
    return Doc(**values)


class AdaptedPrompt:
    """A lighteval prompt function returning this project's `Doc`s (named like the user's function)."""

    def __init__(self, prompt_function: Callable[[dict, str], Any]):
        self.prompt_function = prompt_function
        functools.update_wrapper(self, prompt_function)

    def __call__(self, line: dict, task_name: str) -> Doc | None:
        return adapt_doc(self.prompt_function(line, task_name))


# ----- task configs -----

_SHARED_FIELDS = (
    "name",
    "hf_repo",
    "hf_subset",
    "hf_revision",
    "hf_filter",
    "hf_avail_splits",
    "evaluation_splits",
    "few_shots_split",
    "few_shots_select",
    "generation_size",
    "generation_grammar",
    "stop_sequence",
    "num_samples",
    "suite",
    "must_remove_duplicate_docs",
    "version",
)


def adapt_task_config(config: Any) -> LightevalTaskConfig:
    """A lighteval `LightevalTaskConfig` as this project's."""
    import_lighteval()
    where = f"lighteval task config {getattr(config, 'name', '?')!r}"
    metrics = getattr(config, "metrics", None)
    if metrics is None:
        metrics = getattr(config, "metric", ())
    values = {name: getattr(config, name) for name in _SHARED_FIELDS if hasattr(config, name)}
    values["hf_avail_splits"] = values.get("hf_avail_splits") or ["train", "validation", "test"]
    if values.get("generation_grammar") is not None:
        raise ConfigError(
            f"{where}: generation_grammar (structured generation) is not supported by the Nanotron model."
        )
    return LightevalTaskConfig(
        prompt_function=AdaptedPrompt(config.prompt_function),
        metrics=[adapt_metric(metric, where) for metric in metrics],
        **values,
    )


# ----- lighteval's catalogue -----


def catalogue() -> tuple[list[LightevalTaskConfig], dict[str, str]]:
    """lighteval's own task table (`lighteval.tasks.default_tasks`), adapted.

    Returns the adapted configs and, for each `suite|name` that cannot run here, why (raised when a
    spec asks for it). Only that module is imported: lighteval's registry would import every
    extended task, some of which fail to import in this environment.
    """
    import_lighteval()
    from lighteval.tasks import default_tasks

    configs: list[LightevalTaskConfig] = []
    refused: dict[str, str] = {}
    seen: set[str] = set()
    # lighteval's module defines some `suite|name`s twice; like its registry, the last one wins.
    for value in reversed(list(vars(default_tasks).values())):
        if type(value).__name__ != "LightevalTaskConfig" or not is_lighteval_object(value):
            continue
        suites = [suite for suite in value.suite if f"{suite}|{value.name}" not in seen]
        seen.update(f"{suite}|{value.name}" for suite in suites)
        if not suites:
            continue
        try:
            configs.append(dataclasses.replace(adapt_task_config(value), suite=suites))
        except (ConfigError, CustomTasksError) as error:
            refused.update((f"{suite}|{value.name}", str(error)) for suite in suites)
    return configs[::-1], refused
