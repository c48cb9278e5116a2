"""Signal across a run's evaluations: trend, noise, signal-to-noise, monotonicity, distance from
chance and a verdict per task and metric, and whether one run is ahead of another beyond noise.

Two runs are also compared doc by doc (`paired`, `per_doc`), and a set of runs by Signal and Noise
(`across_runs`). Reads results (files, or each evaluation's results as the training hook produces
them) and per-doc details files, never the model: it sits above the tracking file formats and
below the `report` command and the hook, which share this code. See docs/signal.md.
"""

from lighteval_nanotron.analysis.compare import Comparison, compare_runs
from lighteval_nanotron.analysis.history import RunHistory, Series, load_runs
from lighteval_nanotron.analysis.live import LiveSignal, signal_section
from lighteval_nanotron.analysis.signal import SeriesSignal, SignalSettings, analyze, trend_curve

__all__ = [
    "Comparison",
    "LiveSignal",
    "RunHistory",
    "Series",
    "SeriesSignal",
    "SignalSettings",
    "analyze",
    "compare_runs",
    "load_runs",
    "signal_section",
    "trend_curve",
]
