"""Corpus-level aggregations: from the list of per-sample values of one metric to one number."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np

from lighteval_nanotron.metrics.preparators import ClassificationInput, PerplexityInput


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; its standard error is computed analytically."""
    return float(np.mean(np.asarray(values, dtype=np.float64)))


MEAN_AGGREGATIONS: tuple[Callable, ...] = (mean, np.mean, statistics.mean, statistics.fmean)


def is_mean(aggregation: Callable) -> bool:
    """True for the plain mean of the per-sample values (analytic standard error applies)."""
    return any(aggregation is fn for fn in MEAN_AGGREGATIONS)


def matthews_corrcoef(items: Sequence[ClassificationInput]) -> float:
    """Multi-class Matthews correlation coefficient (Gorodkin's R_K, as scikit-learn).

    0.0 when it is undefined (all golds or all predictions in one class).
    """
    golds = np.asarray([item[0] for item in items], dtype=np.int64)
    preds = np.asarray([item[1] for item in items], dtype=np.int64)
    classes, encoded = np.unique(np.concatenate([golds, preds]), return_inverse=True)
    n = len(golds)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (encoded[:n], encoded[n:]), 1.0)
    true_per_class = confusion.sum(axis=1)
    pred_per_class = confusion.sum(axis=0)
    correct = np.trace(confusion)
    cov_true_pred = correct * n - true_per_class @ pred_per_class
    cov_pred = n * n - pred_per_class @ pred_per_class
    cov_true = n * n - true_per_class @ true_per_class
    if cov_pred == 0 or cov_true == 0:
        return 0.0
    return float(cov_true_pred / math.sqrt(cov_pred * cov_true))


def _per_unit_nll(items: Sequence[PerplexityInput]) -> float:
    total_weight = sum(item[1] for item in items)
    if total_weight <= 0:
        return float("nan")
    return -sum(item[0] for item in items) / total_weight


def exp_or_inf(value: float) -> float:
    """exp(value), inf where it overflows a float (the perplexity of a loss above 709 nats)."""
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf


def weighted_perplexity(items: Sequence[PerplexityInput]) -> float:
    """exp(-sum of log-likelihoods / sum of units): perplexity per word, byte or token."""
    return exp_or_inf(_per_unit_nll(items))


def bits_per_byte(items: Sequence[PerplexityInput]) -> float:
    """-sum of log-likelihoods (nats) / sum of UTF-8 bytes / ln 2."""
    return _per_unit_nll(items) / math.log(2)
