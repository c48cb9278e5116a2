"""The `report` image: one row per task, accuracy and the gold answer's metric side by side, each
run's evaluations with its trend (as the hook computed it at each evaluation) and a noise band.

Draws on matplotlib's Agg canvas (no pyplot), like `tracking.plot`.
"""

from __future__ import annotations

from pathlib import Path

from lighteval_nanotron.analysis.compare import Comparison
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.signal import SignalSettings, analyze, trend_curve
from lighteval_nanotron.tracking.plot import new_figure

GOLD_METRICS = ("gold_bpb", "normalized_mc_prob_norm", "normalized_mc_prob", "gold_margin")


def panel_metrics(metrics: list[str]) -> list[str]:
    """The (at most two) metrics shown for an entry: an accuracy, then a gold-answer metric."""
    plain = [m for m in metrics if not m.endswith("_centered")] or metrics
    accuracy = [m for m in plain if m.startswith("acc")] or [m for m in plain if m.startswith(("em", "f1"))]
    gold = [m for m in GOLD_METRICS if m in metrics] or [m for m in metrics if "normalized_mc_prob" in m]
    chosen = [*(accuracy[:1] or plain[:1]), *gold[:1]]
    return list(dict.fromkeys(chosen))


def _title(entry: str, metric: str, runs: list[RunHistory], comparisons: list[Comparison], settings) -> str:
    if len(runs) == 1:
        return f"{entry}\n{metric}: {analyze(runs[0].series[(entry, metric)], settings).verdict}"
    notes = [c for c in comparisons if c.entry == entry and c.metric == metric]
    text = "; ".join(c.note if c.leader is None or len(runs) == 2 else f"{c.leader} > other" for c in notes)
    return f"{entry}\n{metric}: {text}" if text else f"{entry}\n{metric}"


def _draw(axis, entry: str, metric: str, runs: list[RunHistory], settings: SignalSettings, title: str) -> None:
    chance = None
    for run in runs:
        series = run.series.get((entry, metric))
        if series is None:
            continue
        chance = series.chance if series.chance is not None else chance
        steps = [p.step for p in series.points]
        label = run.name if len(runs) == 1 else f"{run.name} ({analyze(series, settings).verdict})"
        line = axis.plot(steps, [p.value for p in series.points], marker="o", markersize=3, linewidth=0.8, alpha=0.7)[0]
        curve = trend_curve(series, settings)
        color = line.get_color()
        axis.plot([s for s, _, _ in curve], [v for _, v, _ in curve], color=color, linewidth=2.0, label=label)
        banded = [(s, v, n) for s, v, n in curve if n is not None]
        if banded:
            axis.fill_between(
                [s for s, _, _ in banded],
                [v - n for _, v, n in banded],
                [v + n for _, v, n in banded],
                color=color,
                alpha=0.2,
                linewidth=0,
            )
    if chance is not None:
        axis.axhline(chance, color="grey", linestyle="--", linewidth=1, label=f"chance {chance:.2f}")
    axis.set_title(title, fontsize=8)
    axis.set_xlabel("training step", fontsize=8)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=6, loc="best")


def plot_report(
    runs: list[RunHistory],
    path: str | Path,
    settings: SignalSettings,
    comparisons: list[Comparison] | None = None,
    entries: list[str] | None = None,
    dpi: int = 100,
) -> Path:
    """Write the report PNG to `path`; returns it. Rows: the entries of the first run (or
    `entries`); the band around each trend is ± its noise."""
    comparisons = comparisons or []
    rows = entries if entries is not None else list(dict.fromkeys(e for run in runs for e in run.entries()))
    panels = [
        (entry, panel_metrics(list(dict.fromkeys(m for run in runs for m in run.metrics(entry))))) for entry in rows
    ]
    panels = [(entry, metrics) for entry, metrics in panels if metrics]
    if not panels:
        raise ValueError("Nothing to plot: the runs have no evaluation with a training step.")
    figure, axes = new_figure(len(panels), 2, (4.6, 2.9))
    for row, (entry, metrics) in enumerate(panels):
        for column in range(2):
            axis = axes[row][column]
            if column >= len(metrics):
                axis.set_visible(False)
                continue
            _draw(
                axis,
                entry,
                metrics[column],
                runs,
                settings,
                _title(entry, metrics[column], runs, comparisons, settings),
            )
    names = ", ".join(run.name for run in runs)
    figure.suptitle(f"Signal across training: {names} (trend ± noise, window {settings.window})", fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    return path
