"""Standard errors of corpus-level metric values.

- Mean metrics: analytic standard error of the mean, sample standard deviation (ddof=1) divided
  by sqrt(n).
- Any other aggregation (perplexities, MCC, ...): bootstrap. `iters` resamples of the n
  samples, with replacement, from `numpy.random.default_rng(seed)`; the standard error is the
  standard deviation (ddof=1) of the `iters` recomputed values. It runs in-process and never
  touches the global `random` / `numpy.random` state, so a training run is not perturbed.

With a single sample there is no spread to estimate, and with no sample nothing at all: the
standard error is NaN (unknown, never 0.0, which would claim an exact score and put any difference
from chance infinitely many standard errors away); results files write it as `null`
(`tracking.results_file`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lighteval_nanotron.metrics.corpus import is_mean

DEFAULT_BOOTSTRAP_ITERS = 1000
DEFAULT_BOOTSTRAP_SEED = 1234


def mean_stderr(values: Sequence[float]) -> float:
    """std(values, ddof=1) / sqrt(n)."""
    n = len(values)
    if n < 2:
        return float("nan")
    return float(np.std(np.asarray(values, dtype=np.float64), ddof=1) / math.sqrt(n))


def bootstrap_distribution(
    aggregation: Callable[[list], float], values: Sequence[Any], iters: int, seed: int
) -> np.ndarray:
    """`aggregation` recomputed on `iters` resamples (with replacement) of `values`."""
    rng = np.random.default_rng(seed)
    n = len(values)
    stats = np.empty(iters, dtype=np.float64)
    for b in range(iters):
        indices = rng.integers(0, n, size=n)
        stats[b] = aggregation([values[i] for i in indices])
    return stats


def bootstrap_stderr(
    aggregation: Callable[[list], float],
    values: Sequence[Any],
    iters: int = DEFAULT_BOOTSTRAP_ITERS,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> float:
    """Standard deviation (ddof=1) of the bootstrap distribution; NaN under 2 samples or 2 `iters`."""
    if len(values) < 2 or iters < 2:
        return float("nan")
    return float(np.std(bootstrap_distribution(aggregation, values, iters, seed), ddof=1))


def standard_error(
    aggregation: Callable[[list], float],
    values: Sequence[Any],
    iters: int = DEFAULT_BOOTSTRAP_ITERS,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> float:
    """Analytic standard error for a mean aggregation, else the bootstrap one."""
    if is_mean(aggregation):
        return mean_stderr(values)
    return bootstrap_stderr(aggregation, values, iters, seed)
