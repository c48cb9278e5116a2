"""lighteval's metrics (0.11 to 0.13) run by lighteval's own code on this project's model answers.

A lighteval metric becomes a metric of this project with the same result key(s), direction,
category and corpus aggregation; its sample-level function is lighteval's `Metric.compute_sample`,
called on lighteval's `Doc` and `ModelResponse` built from this project's (field for field the
same). So a task file's numbers are lighteval's, whatever the metric and its parameters; the
standard errors are this project's (analytic for means, a seeded bootstrap otherwise).

Two things of lighteval's are followed on purpose:

- PMI normalization (`LogProbPMINorm`): lighteval's metrics read the unconditioned log-probabilities
  after the conditioned ones in `logprobs` (2n entries); this project computes them when such a
  metric asks (`requires_unconditioned_logprobs`) and lays them out that way for it;
- sampling metrics (`maj@n`, `pass@k`, `avg@n`, `g-pass@k`): each doc gets the samples the metric
  asks for (`num_samples`), drawn with the run's generation parameters (greedy is refused at
  prepare time when more than one sample is needed).

Refused by name, when the task is built: LLM judges and batched metrics (an external model),
the metrics that download a scoring model at scoring time (BERTScore, BLEURT, the SummaC
faithfulness score), which would run inside the training process, and a metric whose sample-level
function the installed lighteval's `Metric.compute_sample` refuses (0.13: a plain function instead
of a `SampleLevelComputation` or `Preparator`), which lighteval itself refuses only when scoring.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.metrics.metric import (
    CorpusLevelMetric,
    CorpusLevelMetricGrouping,
    Metric,
    SampleLevelMetric,
    SampleLevelMetricGrouping,
)
from lighteval_nanotron.metrics.sample_logprob import LoglikelihoodAcc
from lighteval_nanotron.requests import Doc, ModelResponse, SamplingMethod
from lighteval_nanotron.tasks.lighteval_adapter.installed import Lighteval, import_lighteval

_SCORING_MODELS = {
    "BertScore": "BERTScore downloads and runs a DeBERTa model",
    "BLEURT": "BLEURT downloads and runs a BLEURT model",
    "Faithfulness": "the SummaC faithfulness score downloads and runs an NLI model",
}


def lighteval_doc(doc: Doc, lighteval: Lighteval) -> Any:
    """This project's `Doc` as lighteval's (the same fields)."""
    lighteval_fields = {f.name for f in dataclasses.fields(lighteval.requests.Doc)}
    values = {f.name: getattr(doc, f.name) for f in dataclasses.fields(Doc) if f.name in lighteval_fields}
    values["sampling_methods"] = [lighteval.requests.SamplingMethod(m.value) for m in doc.sampling_methods]
    values["fewshot_samples"] = [lighteval_doc(example, lighteval) for example in doc.fewshot_samples]
    values["choices"] = list(doc.choices)
    return lighteval.requests.Doc(**values)


def lighteval_response(response: ModelResponse, lighteval: Lighteval, unconditioned_after: bool) -> Any:
    """This project's `ModelResponse` as lighteval's; with `unconditioned_after`, `logprobs` holds the
    unconditioned log-probabilities after the conditioned ones, where lighteval's PMI metrics read them."""
    lighteval_fields = {f.name for f in dataclasses.fields(lighteval.model_output.ModelResponse)}
    values = {
        f.name: getattr(response, f.name) for f in dataclasses.fields(ModelResponse) if f.name in lighteval_fields
    }
    if unconditioned_after:
        values["logprobs"] = [*response.logprobs, *(response.unconditioned_logprobs or [])]
    return lighteval.model_output.ModelResponse(**values)


@dataclasses.dataclass(frozen=True)
class LightevalSampleFn:
    """lighteval's own per-sample computation of `metric`, on this project's doc and model answer."""

    metric: Any

    @property
    def requires_unconditioned_logprobs(self) -> bool:
        """PMI normalization (`LogProbPMINorm`) anywhere in lighteval's sample-level function."""
        fn = self.metric.sample_level_fn
        return any(type(value).__name__ == "LogProbPMINorm" for value in getattr(fn, "__dict__", {}).values())

    @property
    def num_samples(self) -> int | None:
        """Generations per doc a lighteval sampling metric needs (`SamplingMetric.num_samples()`)."""
        count = getattr(self.metric.sample_level_fn, "num_samples", None)
        return int(count()) if callable(count) else None

    def __call__(self, doc: Doc, model_response: ModelResponse) -> Any:
        lighteval = import_lighteval()
        values = self.metric.compute_sample(
            doc=lighteval_doc(doc, lighteval),
            model_response=lighteval_response(model_response, lighteval, self.requires_unconditioned_logprobs),
        )
        if isinstance(self.metric.metric_name, list):
            return values
        return values[self.metric.metric_name]


@dataclasses.dataclass(frozen=True)
class LightevalAccuracyFn(LightevalSampleFn):
    """lighteval's log-likelihood accuracy (any normalization): its chance level on a doc is this
    project's accuracy's, golds / choices, so it gets a centered value too (`metrics.chance`)."""

    def chance(self, doc: Doc) -> float:
        return LoglikelihoodAcc().chance(doc)


def _sample_fn(metric: Any, grouping: bool) -> LightevalSampleFn:
    fn = metric.sample_level_fn
    accuracy = type(fn).__name__ == "LoglikelihoodAcc" and type(fn).__module__.startswith("lighteval.")
    return LightevalAccuracyFn(metric) if accuracy and not grouping else LightevalSampleFn(metric)


def _computable(metric: Any, lighteval: Lighteval) -> bool:
    """Whether the installed lighteval's `Metric.compute_sample` takes the metric's sample-level function
    (0.13: a `SampleLevelComputation` or a `Preparator`, not a plain function)."""
    kinds = tuple(getattr(lighteval.metric_utils, name, None) for name in ("SampleLevelComputation", "Preparator"))
    return not all(isinstance(kind, type) for kind in kinds) or isinstance(metric.sample_level_fn, kinds)


def _refusal(metric: Any, lighteval: Lighteval) -> str | None:
    fn = metric.sample_level_fn
    if isinstance(fn, lighteval.metrics_sample.JudgeLLM):
        return "it asks an LLM judge"
    if getattr(metric, "batched_compute", False):
        return "it scores all docs at once with an external model (batched_compute)"
    for cls in type(fn).__mro__:
        if cls.__name__ in _SCORING_MODELS and cls.__module__.startswith("lighteval."):
            return _SCORING_MODELS[cls.__name__]
    return None


def _aggregations(metric: Any) -> dict[str, Any]:
    """lighteval's corpus aggregations by result key (a `CorpusLevelComputation` by its `compute_corpus`)."""
    names = metric.metric_name if isinstance(metric.metric_name, list) else [metric.metric_name]
    given = metric.corpus_level_fn
    if not isinstance(given, dict):
        given = dict.fromkeys(names, given)
    return {name: fn if callable(fn) else fn.compute_corpus for name, fn in given.items()}


def adapt_metric(metric: Any, where: str) -> Metric:
    """A lighteval metric (a `Metrics` member or a `Metric`) as this project's, same result key(s)."""
    if isinstance(metric, Metric):
        return metric
    lighteval = import_lighteval()
    if isinstance(metric, Enum):
        metric = metric.value
    refusal = _refusal(metric, lighteval)
    if refusal:
        raise ConfigError(
            f"{where}: lighteval metric {metric.metric_name!r} cannot run here: {refusal}. Use a metric computed "
            "from log-probabilities, generations or perplexities."
        )
    if not _computable(metric, lighteval):
        raise ConfigError(
            f"{where}: lighteval metric {metric.metric_name!r}: its sample_level_fn is a "
            f"{type(metric.sample_level_fn).__name__}, and lighteval {lighteval.version} computes only a "
            "SampleLevelComputation or a Preparator (lighteval itself fails with 'Incorrect type' when scoring, "
            "after the evaluation). Subclass lighteval.metrics.metrics_sample.SampleLevelComputation and move the "
            "function into its compute(doc, model_response, **kwargs)."
        )
    grouping = isinstance(metric, lighteval.metric_utils.MetricGrouping)
    corpus_level = isinstance(metric, lighteval.metric_utils.CorpusLevelMetric) or type(metric).__name__.startswith(
        "CorpusLevel"
    )
    cls = {
        (False, False): SampleLevelMetric,
        (False, True): CorpusLevelMetric,
        (True, False): SampleLevelMetricGrouping,
        (True, True): CorpusLevelMetricGrouping,
    }[(grouping, corpus_level)]
    aggregations = _aggregations(metric)
    return cls(
        metric_name=metric.metric_name,
        higher_is_better=metric.higher_is_better,
        category=SamplingMethod(metric.category.value),
        sample_level_fn=_sample_fn(metric, grouping),
        corpus_level_fn=aggregations if grouping else aggregations[metric.metric_name],
    )
