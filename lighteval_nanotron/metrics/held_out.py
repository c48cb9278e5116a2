"""Held-out metrics: loss (nats per token), perplexity and bits per byte, per domain and averaged
over domains, with standard errors. Formulas (docs/metrics.md, "Held-out loss"):

Per domain, windows i = 1..n with summed negative log-likelihood S_i (nats), T_i targets and B_i
bytes:

    loss = sum S_i / sum T_i                      (nats per token, the training loss's unit)
    perplexity = exp(loss)                        (inf beyond a float: a loss above 709)
    bits_per_byte = sum S_i / (ln 2 * sum B_i)

Standard errors treat windows as the sampled units (tokens of one window are not independent):
the ratio estimator's, sqrt(n / (n - 1) * sum (S_i - loss * T_i)^2) / sum T_i (likewise for bits per
byte with B_i), and exp(loss) * se(loss) for perplexity (delta method). `micro` pools every window
of every domain (domains as strata: each residual centred within its domain), `macro` is the plain
mean of the domains' values (standard error sqrt(sum se_d^2) / D), macro perplexity exp(macro loss).
A domain (or stratum) of one window has no spread to estimate: its standard errors are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from lighteval_nanotron.metrics.corpus import exp_or_inf

LOSS, PERPLEXITY, BITS_PER_BYTE = "loss", "perplexity", "bits_per_byte"
STDERR_SUFFIX = "_stderr"


def _ratio_stderr(numerator: np.ndarray, denominator: np.ndarray, strata: Sequence[slice]) -> float:
    """Standard error of sum(numerator) / sum(denominator) over sampled units, strata fixed."""
    total = float(denominator.sum())
    if total <= 0:
        return float("nan")
    ratio = float(numerator.sum()) / total
    residual = numerator - ratio * denominator
    variance = 0.0
    for stratum in strata:
        part = residual[stratum]
        if len(part) < 2:  # one window has no spread to estimate: unknown, not 0
            return float("nan")
        variance += len(part) / (len(part) - 1) * float(((part - part.mean()) ** 2).sum())
    return math.sqrt(variance) / total


def _scores(nll: np.ndarray, tokens: np.ndarray, sizes: np.ndarray, strata: Sequence[slice]) -> dict[str, float]:
    loss = float(nll.sum() / tokens.sum())
    loss_stderr = _ratio_stderr(nll, tokens.astype(np.float64), strata)
    bits = nll / math.log(2)
    total_bytes = float(sizes.sum())
    bits_per_byte = float(bits.sum() / total_bytes) if total_bytes > 0 else float("nan")
    return {
        LOSS: loss,
        LOSS + STDERR_SUFFIX: loss_stderr,
        PERPLEXITY: exp_or_inf(loss),
        PERPLEXITY + STDERR_SUFFIX: exp_or_inf(loss) * loss_stderr,
        BITS_PER_BYTE: bits_per_byte,
        BITS_PER_BYTE + STDERR_SUFFIX: _ratio_stderr(bits, sizes.astype(np.float64), strata),
    }


def domain_scores(nll: np.ndarray, targets_per_window: int, window_bytes: np.ndarray) -> dict[str, float]:
    """One domain's loss, perplexity and bits per byte, each with its standard error."""
    tokens = np.full(len(nll), targets_per_window, dtype=np.int64)
    return _scores(np.asarray(nll, dtype=np.float64), tokens, np.asarray(window_bytes), [slice(0, len(nll))])


def micro_scores(domains: Mapping[str, tuple[np.ndarray, int, np.ndarray]]) -> dict[str, float]:
    """Every window of every domain pooled (`{name: (nll, targets per window, bytes)}`)."""
    nll, tokens, sizes, strata, start = [], [], [], [], 0
    for values, per_window, window_bytes in domains.values():
        nll.append(np.asarray(values, dtype=np.float64))
        tokens.append(np.full(len(values), per_window, dtype=np.int64))
        sizes.append(np.asarray(window_bytes))
        strata.append(slice(start, start + len(values)))
        start += len(values)
    return _scores(np.concatenate(nll), np.concatenate(tokens), np.concatenate(sizes), strata)


def macro_scores(per_domain: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean over domains of loss and bits per byte; perplexity = exp(mean loss)."""
    count = len(per_domain)
    scores: dict[str, float] = {}
    for name in (LOSS, BITS_PER_BYTE):
        scores[name] = sum(d[name] for d in per_domain.values()) / count
        scores[name + STDERR_SUFFIX] = math.sqrt(sum(d[name + STDERR_SUFFIX] ** 2 for d in per_domain.values())) / count
    scores[PERPLEXITY] = exp_or_inf(scores[LOSS])
    scores[PERPLEXITY + STDERR_SUFFIX] = scores[PERPLEXITY] * scores[LOSS + STDERR_SUFFIX]
    return {key: scores[key] for key in _ORDER}


_ORDER = [name + suffix for name in (LOSS, PERPLEXITY, BITS_PER_BYTE) for suffix in ("", STDERR_SUFFIX)]
