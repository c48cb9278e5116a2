"""The `report` tables: per run, each entry and metric with its signal; with several runs, which
run is ahead of which beyond the noise."""

from __future__ import annotations

import math

from lighteval_nanotron.analysis.compare import Comparison
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.report_plot import panel_metrics
from lighteval_nanotron.analysis.signal import SignalSettings, analyze


def _number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return ""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def _aligned(rows: list[tuple[str, ...]], left: set[int]) -> str:
    """Markdown-style lines; the columns in `left` left-aligned, the numbers right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


SIGNAL_HEADER = (
    "Task",
    "Metric",
    "Step",
    "Value",
    "Stderr",
    "Trend",
    "Noise",
    "SNR",
    "Monotonic",
    "vs chance",
    "Verdict",
)


def signal_table(run: RunHistory, settings: SignalSettings) -> str:
    """One row per entry and metric: latest value and standard error, smoothed trend, noise,
    signal-to-noise, monotonicity, distance from chance (in standard errors) and the verdict."""
    rows = [SIGNAL_HEADER]
    for entry in run.entries():
        for metric in run.metrics(entry):
            found = analyze(run.series[(entry, metric)], settings)
            rows.append(
                (
                    entry,
                    metric,
                    str(found.step),
                    _number(found.value),
                    _number(found.stderr),
                    _number(found.trend),
                    _number(found.noise),
                    _number(found.snr, 1),
                    _number(found.monotonicity, 2),
                    _number(found.chance_distance, 1),
                    found.verdict,
                )
            )
    return _aligned(rows, left={0, 1, len(SIGNAL_HEADER) - 1})


def comparison_table(comparisons: list[Comparison]) -> str:
    """One row per pair of runs, entry and metric: both smoothed values at the common step, their
    difference, the combined noise and which run is ahead (or `within noise`)."""
    rows = [("Task", "Metric", "Step", "Run A", "A trend", "Run B", "B trend", "A - B", "Noise", "Result")]
    for c in comparisons:
        rows.append(
            (
                c.entry,
                c.metric,
                str(c.step),
                c.run_a,
                _number(c.a.trend_at(c.step)),
                c.run_b,
                _number(c.b.trend_at(c.step)),
                _number(c.a.trend_at(c.step) - c.b.trend_at(c.step) if c.difference is not None else None),
                _number(c.combined_noise),
                c.note,
            )
        )
    return _aligned(rows, left={0, 1, 3, 5, 9})


def signal_summary(section: dict) -> str:
    """The signal section of one evaluation (`live.signal_section`), shortened for the training
    log: per task its accuracy and gold-answer metric, with trend, signal-to-noise and verdict."""
    rows = [("Task", "Metric", "Trend", "SNR", "Verdict")]
    for entry, metrics in section.get("series", {}).items():
        for metric in panel_metrics(list(metrics)):
            found = metrics[metric]
            rows.append((entry, metric, _number(found["trend"]), _number(found["snr"], 1), found["verdict"]))
    return _aligned(rows, left={0, 1, 4}) if len(rows) > 1 else ""
