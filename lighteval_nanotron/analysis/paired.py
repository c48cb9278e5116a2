"""Two runs compared doc by doc: a paired bootstrap over the docs both scored, sizing, and one
verdict per task with the false-alarm rate controlled over every task and metric compared.
Definitions (docs/signal.md, "Two runs, doc by doc"; after AI2's olmo-eval `stats/paired.py`,
`sign_test.py` and `mde.py`):

- **per-doc difference** d_i = a_i - b_i over the docs both runs scored (the same doc id); the
  **difference** is their mean, in the metric's units (A - B).
- **paired bootstrap**: `RESAMPLES` = 2,000 resamples of the n differences with replacement (numpy's
  PCG64 seeded with `seed`, 0 by default, so a report is reproducible); the 95% interval is the
  2.5th and 97.5th percentiles of the resampled means; the two-sided **p-value** is
  2 x min(share of resampled means <= 0, share >= 0), capped at 1 (0 lies outside the percentile
  interval exactly when p < 0.05). At least `MIN_SHARED` = 20 shared docs.
- **unpaired fallback** (fewer than `MIN_SHARED` shared docs: the runs scored other docs): Welch's
  z-test of the two means, interval difference +- 1.96 x se, se = sqrt(var_a / n_a + var_b / n_b).
- **wins / losses / ties**: docs where A is better / worse / equal (in the metric's direction);
  **sign test**: the two-sided binomial p-value of wins among wins + losses.
- **standard error** se = std(d, ddof=1) / sqrt(n); **minimum detectable effect** at 80% power and
  a two-sided 5% level, MDE80 = (z(0.975) + z(0.8)) x se = 2.80 se; **docs for an effect** e:
  n x (MDE80 / e)^2 rounded up, the doc count at which e is the MDE80.
- **noise beyond the docs**: the docs are not the only noise. Neighbouring checkpoints of one run
  differ, and so do two seeds of one config on the same docs (measured: docs/signal.md,
  "Calibration"). The **runs' test** puts them beside the docs' standard error:
  t = difference / sqrt(se^2 + noise_A^2 + noise_B^2 + 2 seed^2), noise_A and noise_B each run's
  checkpoint-to-checkpoint noise (`signal.analyze`, the spread around its trend; divided by sqrt(k)
  for the mean of k evaluations), seed the standard deviation (ddof 1) of the value across m seed
  runs of one config where they are given (`report --seed-runs`; 0 otherwise, and then a verdict
  is about these two runs, not about their configs); its two-sided p-value (**p runs**) is the
  normal's, or Student's t with the Welch-Satterthwaite degrees of freedom
  (se^2 + noise^2 + 2 seed^2)^2 / ((2 seed^2)^2 / (m - 1)) where a seed spread enters. Fewer than 3
  evaluations (or 2 seed runs with those steps) measure no noise: no p runs, nothing ahead.
- **many comparisons**: the p runs of one table (every task and metric compared at one step, or
  over the last k common evaluations) are adjusted by Holm's step-down method, which keeps the
  chance of any false "ahead" in the table at or below `alpha` (family-wise, 5%) as far as these
  noises are the noise; a comparison is `ahead` when its adjusted p < alpha.
- **verdict per task**: `A ahead` / `B ahead` when every metric that is ahead favours the same run;
  `within noise` when none is; `not comparable` (with why) when the metrics disagree, or no metric
  could be compared.

Centered metrics (`*_centered`) are the same test as their metric (each doc's difference divided by
1 - chance) and are left out, so that they do not count twice in the adjustment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

RESAMPLES = 2000
MIN_SHARED = 20
ALPHA = 0.05
POWER = 0.8
CENTERED_SUFFIX = "_centered"
A_AHEAD, B_AHEAD, WITHIN_NOISE, NOT_COMPARABLE = "A ahead", "B ahead", "within noise", "not comparable"
CHUNK = 250
"""Resamples drawn at once (bounds the memory of a comparison over many docs)."""


def mde_factor(alpha: float = ALPHA, power: float = POWER) -> float:
    """z(1 - alpha/2) + z(power): the MDE in standard errors (2.80 at 5% and 80%)."""
    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


MDE80 = mde_factor()


def docs_for_effect(docs: int, mde: float | None, effect: float) -> int | None:
    """Docs at which `effect` is the minimum detectable effect (None: no spread measured)."""
    if mde is None or not (math.isfinite(mde) and mde > 0) or docs < 2:
        return None
    return max(2, math.ceil(docs * (mde / effect) ** 2))


@dataclass(frozen=True)
class DocComparison:
    """One task and metric of two runs (`difference` = mean A - mean B, in the metric's units)."""

    task: str
    metric: str
    method: str
    """`paired` (over the shared docs) or `unpaired` (other docs: fewer than MIN_SHARED shared)."""
    docs_a: int
    docs_b: int
    shared: int
    difference: float
    low: float
    high: float
    p_value: float
    stderr: float
    mde: float
    wins: int | None
    losses: int | None
    ties: int | None
    sign_p: float | None
    higher_is_better: bool
    checkpoint_noise: float | None = None
    """sqrt(noise_A^2 + noise_B^2) [/ sqrt(k)], the runs' checkpoint-to-checkpoint noise (None: unmeasured)."""
    seed_noise: float | None = 0.0
    """The standard deviation of the value across `seed_runs` seed runs (0: none given; None: unmeasured)."""
    seed_runs: int = 0
    p_adjusted: float = 1.0
    """`p_runs` adjusted by Holm's method over the comparison's table (`adjusted`)."""
    docs_for_effect: int | None = None

    @property
    def noise(self) -> float | None:
        """sqrt(checkpoint_noise^2 + 2 seed_noise^2): the difference's noise beyond the docs."""
        if self.checkpoint_noise is None or self.seed_noise is None:
            return None
        return math.sqrt(self.checkpoint_noise**2 + 2 * self.seed_noise**2)

    @property
    def p_runs(self) -> float | None:
        """The runs' test: the difference against the docs', checkpoints' and seeds' noise."""
        if self.noise is None:
            return None
        total = self.stderr**2 + self.noise**2
        if total == 0:
            return 1.0 if self.difference == 0 else 0.0
        seed = 2 * self.seed_noise**2
        freedom = total**2 / (seed**2 / (self.seed_runs - 1)) if seed > 0 else math.inf
        return float(2 * stats.t.sf(abs(self.difference) / math.sqrt(total), freedom))

    @property
    def better(self) -> str | None:
        """`A` or `B` when the Holm-adjusted p runs is below ALPHA."""
        if not self.p_adjusted < ALPHA:
            return None
        return "A" if (self.difference > 0) == self.higher_is_better else "B"

    def to_dict(self) -> dict:
        return {**asdict(self), "noise": self.noise, "p_runs": self.p_runs, "better": self.better}


def _bootstrap_means(differences: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(differences)
    means = [differences[rng.integers(0, n, size=(CHUNK, n))].mean(axis=1) for _ in range(RESAMPLES // CHUNK)]
    return np.concatenate(means)


def paired_test(a: np.ndarray, b: np.ndarray, higher_is_better: bool, seed: int = 0) -> dict:
    """The paired bootstrap, sign test and sizing of per-doc values `a`, `b` (same docs, same order)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    means = _bootstrap_means(d, seed)
    p = min(1.0, 2 * min(float(np.mean(means <= 0)), float(np.mean(means >= 0))))
    stderr = float(np.std(d, ddof=1) / math.sqrt(n))
    signed = d if higher_is_better else -d
    wins, losses = int(np.sum(signed > 0)), int(np.sum(signed < 0))
    sign_p = float(stats.binomtest(wins, wins + losses, 0.5).pvalue) if wins + losses else 1.0
    return {
        "method": "paired",
        "difference": float(d.mean()),
        "low": float(np.percentile(means, 2.5)),
        "high": float(np.percentile(means, 97.5)),
        "p_value": p,
        "stderr": stderr,
        "mde": MDE80 * stderr,
        "wins": wins,
        "losses": losses,
        "ties": n - wins - losses,
        "sign_p": sign_p,
    }


def unpaired_test(a: np.ndarray, b: np.ndarray) -> dict:
    """Welch's z-test of two means over different docs."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    stderr = math.sqrt(np.var(a, ddof=1) / len(a) + np.var(b, ddof=1) / len(b))
    difference = float(a.mean() - b.mean())
    z = stats.norm.ppf(0.975)
    if stderr > 0:
        p = float(2 * stats.norm.sf(abs(difference) / stderr))
    else:  # every doc scored alike in each run: the means differ exactly, or not at all
        p = 1.0 if difference == 0 else 0.0
    return {
        "method": "unpaired",
        "difference": difference,
        "low": difference - z * stderr,
        "high": difference + z * stderr,
        "p_value": p,
        "stderr": stderr,
        "mde": MDE80 * stderr,
        "wins": None,
        "losses": None,
        "ties": None,
        "sign_p": None,
    }


def compare_docs(
    task: str,
    metric: str,
    a: Mapping[str, float],
    b: Mapping[str, float],
    higher_is_better: bool,
    seed: int = 0,
    effect: float | None = None,
) -> DocComparison | str:
    """Per-doc values `{doc id: value}` of two runs compared; a string says why they cannot be."""
    shared = sorted(set(a) & set(b))
    if len(shared) >= MIN_SHARED:
        found = paired_test([a[doc] for doc in shared], [b[doc] for doc in shared], higher_is_better, seed)
    elif min(len(a), len(b)) >= MIN_SHARED:
        found = unpaired_test(list(a.values()), list(b.values()))
    else:
        return f"fewer than {MIN_SHARED} docs ({len(a)} and {len(b)}, {len(shared)} shared)"
    docs = len(shared) if found["method"] == "paired" else min(len(a), len(b))
    return DocComparison(
        task,
        metric,
        docs_a=len(a),
        docs_b=len(b),
        shared=len(shared),
        higher_is_better=higher_is_better,
        docs_for_effect=None if effect is None else docs_for_effect(docs, found["mde"], effect),
        **found,
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error at most alpha when adjusted p < alpha)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def adjusted(comparisons: list[DocComparison]) -> list[DocComparison]:
    """The comparisons of one table with their p runs adjusted by Holm's method (unmeasured: 1)."""
    p_runs = [1.0 if c.p_runs is None else c.p_runs for c in comparisons]
    return [replace(c, p_adjusted=p) for c, p in zip(comparisons, holm(p_runs))]


def task_verdict(comparisons: list[DocComparison], reasons: list[str]) -> tuple[str, str]:
    """(verdict, why) of one task from its metrics' comparisons (already adjusted)."""
    if not comparisons:
        return NOT_COMPARABLE, "; ".join(dict.fromkeys(reasons)) or "no metric compared"
    leaders = {c.better for c in comparisons} - {None}
    if not leaders and any(c.noise is None for c in comparisons):
        return WITHIN_NOISE, (
            "the noise beyond the docs is unmeasured for "
            + ", ".join(c.metric for c in comparisons if c.noise is None)
            + " (fewer than 3 evaluations, or 2 seed runs with these steps)"
        )
    if not leaders:
        return WITHIN_NOISE, f"no metric beyond the docs', checkpoints' and seeds' noise (Holm, {ALPHA:.0%})"
    if len(leaders) > 1:
        return NOT_COMPARABLE, "metrics disagree: " + ", ".join(
            f"{c.metric} favours {c.better}" for c in comparisons if c.better
        )
    leader = leaders.pop()
    return (A_AHEAD if leader == "A" else B_AHEAD), ", ".join(c.metric for c in comparisons if c.better)
