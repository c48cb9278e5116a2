"""Metric objects: a sample-level function, a corpus-level aggregation, a name and a direction.

A `sample_level_fn` is called as `fn(doc, model_response)`; objects with a lighteval-style
`compute(doc=..., model_response=...)` or `prepare(...)` method are accepted too. A metric
returns one value per sample (`SampleLevelMetric`, `CorpusLevelMetric`) or a dict of values
(`...Grouping`), and `get_corpus_aggregations()` says how each is aggregated over the corpus.

Metrics are immutable: `metric(sample_params={...})` returns a new metric whose name gets
lighteval's suffix, `<name>_with_<param1>&<param2>`; the original stays as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lighteval_nanotron.errors import MetricError
from lighteval_nanotron.metrics.params import parametrize
from lighteval_nanotron.requests import Doc, ModelResponse, SamplingMethod

Aggregation = Callable[[list], float]


@dataclass(frozen=True, eq=False)
class Metric:
    """One metric (or a group of metrics computed together) of a task.

    Attributes:
        metric_name: Key of the value in results; a list of keys for groupings.
        higher_is_better: Direction of the metric; a dict per key for groupings.
        category: The sampling method the metric needs (LOGPROBS, GENERATIVE, PERPLEXITY).
        sample_level_fn: `fn(doc, model_response)` -> the per-sample value (a dict for groupings).
        corpus_level_fn: Aggregation of the per-sample values, or a dict of them per key.
    """

    metric_name: str | list[str]
    higher_is_better: bool | dict[str, bool]
    category: SamplingMethod
    sample_level_fn: Callable[..., Any]
    corpus_level_fn: Aggregation | dict[str, Aggregation]

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "category", SamplingMethod(self.category))
        except ValueError as exc:
            raise MetricError(
                f"Metric {self.metric_name!r}: category must be one of "
                f"{', '.join(m.value for m in SamplingMethod)}, got {self.category!r}."
            ) from exc
        if not callable(self.sample_level_fn) and not _has_method(self.sample_level_fn):
            raise MetricError(f"Metric {self.metric_name!r}: sample_level_fn must be callable.")
        self._check_names()

    def _check_names(self) -> None:
        if not isinstance(self.metric_name, str) or not self.metric_name:
            raise MetricError(f"{type(self).__name__} needs a non-empty string metric_name, got {self.metric_name!r}.")
        if isinstance(self.corpus_level_fn, dict) or not callable(self.corpus_level_fn):
            raise MetricError(f"Metric {self.metric_name!r}: corpus_level_fn must be one callable.")

    @property
    def metric_names(self) -> list[str]:
        """The result keys this metric produces."""
        return [self.metric_name] if isinstance(self.metric_name, str) else list(self.metric_name)

    @property
    def requires_unconditioned_logprobs(self) -> bool:
        """True when the engine must also score each choice after `doc.unconditioned_query`."""
        return bool(getattr(self.sample_level_fn, "requires_unconditioned_logprobs", False))

    def compute_sample(self, doc: Doc, model_response: ModelResponse) -> dict[str, Any]:
        """The per-sample value(s) of this metric for one doc, keyed by metric name."""
        return {self.metric_name: self._run_sample_fn(doc, model_response)}

    def _run_sample_fn(self, doc: Doc, model_response: ModelResponse) -> Any:
        fn = self.sample_level_fn
        if hasattr(fn, "compute"):
            return fn.compute(doc=doc, model_response=model_response)
        if hasattr(fn, "prepare"):
            return fn.prepare(doc=doc, model_response=model_response)
        return fn(doc, model_response)

    def get_corpus_aggregations(self) -> dict[str, Aggregation]:
        """Metric name -> function turning the list of per-sample values into the corpus value."""
        return {self.metric_name: self.corpus_level_fn}

    def __call__(self, sample_params: Mapping[str, Any] | None = None) -> Metric:
        """A copy with the sample-level function's parameters set and the name suffixed.

        Values may be strings from a task spec (`@logprob_normalization=char`). Unknown or
        invalid parameters raise MetricError.
        """
        if not sample_params:
            return dataclasses.replace(self)
        fn = parametrize(self.sample_level_fn, sample_params, str(self.metric_name))
        suffix = "_with_" + "&".join(sample_params)
        return self._renamed(fn, suffix)

    def _renamed(self, fn: Any, suffix: str) -> Metric:
        return dataclasses.replace(self, metric_name=self.metric_name + suffix, sample_level_fn=fn)


@dataclass(frozen=True, eq=False)
class SampleLevelMetric(Metric):
    """Scored per sample, then aggregated (usually averaged) over the corpus."""


@dataclass(frozen=True, eq=False)
class CorpusLevelMetric(Metric):
    """The sample-level function prepares inputs; the value is computed over the whole corpus."""


@dataclass(frozen=True, eq=False)
class MetricGrouping(Metric):
    """Several metrics computed together; the sample-level function returns a dict by name.

    `sample_keys` are the keys the sample-level function returns, in the order of
    `metric_name`; they default to the metric names and stay fixed when a parametrized copy
    renames the metrics.
    """

    metric_name: list[str]
    higher_is_better: dict[str, bool]
    corpus_level_fn: Aggregation | dict[str, Aggregation]
    sample_keys: list[str] | None = field(default=None, repr=False)

    def _check_names(self) -> None:
        names = self.metric_name
        if isinstance(names, str) or not names or not all(isinstance(n, str) and n for n in names):
            raise MetricError(f"{type(self).__name__} needs a non-empty list of metric names, got {names!r}.")
        object.__setattr__(self, "metric_name", list(names))
        if self.sample_keys is None:
            object.__setattr__(self, "sample_keys", list(names))
        if len(self.sample_keys) != len(names):
            raise MetricError(f"Metric group {names!r}: sample_keys must have one key per metric name.")
        if isinstance(self.higher_is_better, bool):
            object.__setattr__(self, "higher_is_better", dict.fromkeys(names, self.higher_is_better))
        if not isinstance(self.corpus_level_fn, dict):
            object.__setattr__(self, "corpus_level_fn", dict.fromkeys(names, self.corpus_level_fn))
        for label, mapping in (("higher_is_better", self.higher_is_better), ("corpus_level_fn", self.corpus_level_fn)):
            if set(mapping) != set(names):
                raise MetricError(
                    f"Metric group {names!r}: {label} keys {sorted(mapping)} must be exactly the metric names."
                )

    def compute_sample(self, doc: Doc, model_response: ModelResponse) -> dict[str, Any]:
        values = self._run_sample_fn(doc, model_response)
        if not isinstance(values, Mapping):
            raise MetricError(f"Metric group {self.metric_name!r}: sample_level_fn must return a dict by metric name.")
        missing = [key for key in self.sample_keys if key not in values]
        if missing:
            raise MetricError(f"Metric group {self.metric_name!r}: sample_level_fn returned no value for {missing}.")
        return {name: values[key] for name, key in zip(self.metric_name, self.sample_keys)}

    def get_corpus_aggregations(self) -> dict[str, Aggregation]:
        return dict(self.corpus_level_fn)

    def _renamed(self, fn: Any, suffix: str) -> Metric:
        rename = {name: name + suffix for name in self.metric_name}
        return dataclasses.replace(
            self,
            metric_name=[rename[n] for n in self.metric_name],
            higher_is_better={rename[k]: v for k, v in self.higher_is_better.items()},
            corpus_level_fn={rename[k]: v for k, v in self.corpus_level_fn.items()},
            sample_level_fn=fn,
            sample_keys=list(self.sample_keys),
        )


@dataclass(frozen=True, eq=False)
class SampleLevelMetricGrouping(MetricGrouping):
    """A group of per-sample metrics computed together, each aggregated over the corpus."""


@dataclass(frozen=True, eq=False)
class CorpusLevelMetricGrouping(MetricGrouping):
    """A group of corpus-level metrics sharing one sample-level preparation."""


def _has_method(fn: Any) -> bool:
    return callable(getattr(fn, "compute", None)) or callable(getattr(fn, "prepare", None))
