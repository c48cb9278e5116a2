"""Standard errors: analytic for means, a correct seeded in-process bootstrap otherwise."""

import math
import random

import numpy as np
import pytest

from lighteval_nanotron.metrics import Metrics, aggregate_task_metrics
from lighteval_nanotron.metrics.corpus import mean, weighted_perplexity
from lighteval_nanotron.metrics.preparators import PerplexityInput
from lighteval_nanotron.metrics.stderr import bootstrap_stderr, mean_stderr, standard_error


def median(values):
    return float(np.median(values))


def test_mean_stderr_by_hand():
    # mean 0.5, sample variance (4 * 0.25) / 3 = 1/3 -> sqrt(1/3) / sqrt(4)
    assert mean_stderr([1, 0, 1, 0]) == pytest.approx(math.sqrt(1 / 3) / 2)
    assert standard_error(np.mean, [1, 0, 1, 0]) == pytest.approx(math.sqrt(1 / 3) / 2)


def test_single_doc_and_no_doc_stderr_are_nan():
    """One doc has no spread to estimate: 0.0 would claim an exact score (and put any difference
    from chance infinitely many standard errors away in the signal's verdict)."""
    assert math.isnan(mean_stderr([1.0]))
    assert math.isnan(bootstrap_stderr(median, [3.0]))
    assert math.isnan(mean_stderr([]))
    assert math.isnan(bootstrap_stderr(median, []))


def test_bootstrap_is_deterministic_for_a_seed():
    values = [float(v) for v in range(20)]
    assert bootstrap_stderr(median, values, iters=200, seed=7) == bootstrap_stderr(median, values, iters=200, seed=7)
    assert bootstrap_stderr(median, values, iters=200, seed=7) != bootstrap_stderr(median, values, iters=200, seed=8)


def test_bootstrap_is_the_std_of_the_bootstrap_distribution():
    values = [1.0, 5.0, 2.0, 8.0, 3.0, 9.0, 4.0]
    rng = np.random.default_rng(42)
    distribution = []
    for _ in range(300):
        indices = rng.integers(0, len(values), size=len(values))
        distribution.append(median([values[i] for i in indices]))
    expected = float(np.std(distribution, ddof=1))
    assert bootstrap_stderr(median, values, iters=300, seed=42) == pytest.approx(expected)


def test_bootstrap_of_a_mean_matches_the_analytic_stderr():
    # Not divided by sqrt(iters): a bootstrap of the mean estimates std / sqrt(n), like the formula.
    values = [float(v) for v in np.random.default_rng(0).integers(0, 2, size=400)]
    boot = bootstrap_stderr(lambda v: float(np.mean(v)), values, iters=1000, seed=1)
    assert boot == pytest.approx(mean_stderr(values), rel=0.1)


def test_bootstrap_iters_below_two_gives_nan():
    assert math.isnan(bootstrap_stderr(median, [1.0, 2.0], iters=0))


def test_corpus_metric_uses_bootstrap_and_mean_metric_uses_formula():
    items = [PerplexityInput(-float(i), i + 1) for i in range(10)]
    boot = bootstrap_stderr(weighted_perplexity, items, iters=100, seed=3)
    result = aggregate_task_metrics(
        [Metrics.word_perplexity, Metrics.loglikelihood_acc],
        [{"word_perplexity": item, "acc": i % 2} for i, item in enumerate(items)],
        bootstrap_iters=100,
        seed=3,
    )
    assert result["word_perplexity_stderr"] == pytest.approx(boot)
    assert result["acc_stderr"] == pytest.approx(mean_stderr([i % 2 for i in range(10)]))
    assert standard_error(mean, [0, 1]) == pytest.approx(0.5)


def test_global_rng_state_is_untouched():
    random.seed(123)
    np.random.seed(123)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    items = [PerplexityInput(-float(i), i + 1) for i in range(10)]
    aggregate_task_metrics([Metrics.word_perplexity], [{"word_perplexity": item} for item in items])
    assert random.getstate() == python_state
    after = np.random.get_state()
    assert after[0] == numpy_state[0] and np.array_equal(after[1], numpy_state[1]) and after[2:] == numpy_state[2:]
