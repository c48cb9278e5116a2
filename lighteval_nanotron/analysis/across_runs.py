"""Which tasks separate a set of runs: signal, noise and signal-to-noise per task and metric, as
"Signal and Noise" defines them (Heineman et al., 2025, arXiv 2508.13144; github.com/allenai/
signal-and-noise, `snr/metrics.py: signal_to_noise_ratio` fed as `snr_simple.compute_snr_small_scale`
feeds it):

- each run j's **score** m_j = the mean of its last `last` evaluations (5 by default), taken up to
  the last step every run reached, so that no run is scored later in training than another;
- **signal** = max over pairs |m_j - m_k| / mean_j m_j (the relative dispersion of the runs);
- **noise** = std / mean of the pooled last-`last` values of every run (numpy's std, ddof 0);
- **SNR** = signal / noise.

Relative spreads need a positive mean: where the mean score is 0 or below (centered values,
margins) the three are undefined (None), and centered metrics are left out. A run with fewer than
`last` evaluations there leaves the task and metric out (`too few evaluations`).

The published SNR ranks tasks; it is no test (for two runs it cannot exceed 2). The
**recommendation** says a task separates these runs when, on its best metric, the spread of the
run scores exceeds `SEPARATION` (2) standard errors of a difference of two runs' k-means,
max |m_j - m_k| > 2 x sqrt(2 / k) x s_within, s_within the pooled standard deviation of each run's
last k values around its own mean (ddof 1).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from lighteval_nanotron.analysis.compare import SEPARATION
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.paired import CENTERED_SUFFIX

DEFAULT_LAST = 5


@dataclass(frozen=True)
class RunsSignal:
    """One entry and metric over a set of runs."""

    entry: str
    metric: str
    step: int
    last: int
    scores: dict[str, float]
    """run -> the mean of its last `last` evaluations up to `step`."""
    signal: float | None
    noise: float | None
    snr: float | None
    spread: float
    """max |m_j - m_k|, in the metric's units."""
    within_std: float
    separates: bool

    def to_dict(self) -> dict:
        return asdict(self)


def signal_to_noise(scores: list[float], pooled: list[float]) -> tuple[float | None, float | None, float | None]:
    """(signal, noise, SNR) of run scores and their pooled last values, the published formula."""
    mean_scores, mean_pooled = float(np.mean(scores)), float(np.mean(pooled))
    if mean_scores <= 0 or mean_pooled <= 0:
        return None, None, None
    signal = max(abs(a - b) for a in scores for b in scores) / mean_scores
    noise = float(np.std(pooled)) / mean_pooled
    return signal, noise, (signal / noise if noise > 0 else math.inf)


def runs_signal(runs: list[RunHistory], last: int = DEFAULT_LAST) -> list[RunsSignal]:
    """Every entry and metric all `runs` have, in the first run's order."""
    if last < 2:
        raise ValueError(f"last={last}: the noise of the last evaluations needs at least 2 of them.")
    found = []
    for entry in runs[0].entries():
        for metric in runs[0].metrics(entry):
            series = [run.series.get((entry, metric)) for run in runs]
            if metric.endswith(CENTERED_SUFFIX) or any(s is None or not s.points for s in series):
                continue
            step = min(s.points[-1].step for s in series)
            tails = [[p.value for p in s.up_to(step).points[-last:]] for s in series]
            if any(len(tail) < last for tail in tails):
                continue
            scores = [float(np.mean(tail)) for tail in tails]
            signal, noise, snr = signal_to_noise(scores, [v for tail in tails for v in tail])
            within = math.sqrt(float(np.mean([np.var(tail, ddof=1) for tail in tails])))
            spread = max(scores) - min(scores)
            found.append(
                RunsSignal(
                    entry,
                    metric,
                    step,
                    last,
                    {run.name: score for run, score in zip(runs, scores)},
                    signal,
                    noise,
                    snr,
                    spread,
                    within,
                    spread > SEPARATION * math.sqrt(2 / last) * within,
                )
            )
    return found


def ranked(found: list[RunsSignal]) -> list[RunsSignal]:
    """Each entry's metric of highest SNR (undefined SNR last), entries by that SNR, highest first."""
    best: dict[str, RunsSignal] = {}
    for item in found:
        mine = best.get(item.entry)
        if mine is None or (item.snr or -1.0) > (mine.snr or -1.0):
            best[item.entry] = item
    return sorted(best.values(), key=lambda item: -(item.snr if item.snr is not None else -1.0))


def recommendation(found: list[RunsSignal]) -> str:
    """Which entries separate these runs (on their best metric) and which do not."""
    order = ranked(found)
    yes = [f"{i.entry} ({i.metric}, SNR {i.snr:.2f})" for i in order if i.separates and i.snr is not None]
    no = [f"{i.entry} ({i.metric})" for i in order if not (i.separates and i.snr is not None)]
    lines = [f"Separate these runs: {', '.join(yes) if yes else 'none'}."]
    lines.append(
        f"Do not (spread within {SEPARATION:g} standard errors of the checkpoints' noise): {', '.join(no) or 'none'}."
    )
    return "\n".join(lines)
