"""Metrics: sample-level scoring of model responses, corpus aggregation and standard errors.

Public surface (lighteval names): `Metrics` (the built-in table), the metric classes, the
log-prob normalizations, the text normalizers, `aggregate_task_metrics` (a task's values and
standard errors) and `average_over_tasks` (the `all` entry). See docs/metrics.md.
"""

from lighteval_nanotron.metrics.aggregation import aggregate_task_metrics, average_over_tasks
from lighteval_nanotron.metrics.metric import (
    CorpusLevelMetric,
    CorpusLevelMetricGrouping,
    Metric,
    MetricGrouping,
    SampleLevelMetric,
    SampleLevelMetricGrouping,
)
from lighteval_nanotron.metrics.normalizations import (
    LogProbCharNorm,
    LogProbNormalization,
    LogProbPMINorm,
    LogProbTokenNorm,
    gsm8k_normalizer,
    harness_triviaqa_normalizer,
    helm_normalizer,
)
from lighteval_nanotron.metrics.table import Metrics

__all__ = [
    "CorpusLevelMetric",
    "CorpusLevelMetricGrouping",
    "LogProbCharNorm",
    "LogProbNormalization",
    "LogProbPMINorm",
    "LogProbTokenNorm",
    "Metric",
    "MetricGrouping",
    "Metrics",
    "SampleLevelMetric",
    "SampleLevelMetricGrouping",
    "aggregate_task_metrics",
    "average_over_tasks",
    "gsm8k_normalizer",
    "harness_triviaqa_normalizer",
    "helm_normalizer",
]
