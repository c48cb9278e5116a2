"""The `report` tables: per run, each entry and metric with its signal; with several runs, which
run is ahead of which beyond the noise."""

from __future__ import annotations

import math

from lighteval_nanotron.analysis.across_runs import RunsSignal, ranked
from lighteval_nanotron.analysis.compare import Comparison
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.per_doc import PairTable
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
    "MDE80",
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
                    _number(found.mde),
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
    rows = [("Task", "Metric", "Trend", "SNR", "MDE80", "Verdict")]
    for entry, metrics in section.get("series", {}).items():
        for metric in panel_metrics(list(metrics)):
            found = metrics[metric]
            mde = _number(found.get("mde"))
            rows.append((entry, metric, _number(found["trend"]), _number(found["snr"], 1), mde, found["verdict"]))
    return _aligned(rows, left={0, 1, 5}) if len(rows) > 1 else ""


def paired_table(table: PairTable, effect: float | None = None) -> str:
    """Two runs doc by doc (analysis/paired.py): per task and metric the test, docs, difference,
    95% interval and p-value over the docs, wins/losses/ties, sign test, MDE80, the noise beyond the
    docs (checkpoints, seeds), the runs' test and its Holm adjustment (and the docs for `effect`);
    then one verdict per task."""
    header = ["Task", "Metric", "Test", "Docs", "A - B", "95% interval", "p", "W/L/T", "Sign p", "MDE80"]
    header += ["Noise", "p runs", "p Holm"] + ([f"Docs for {effect:g}"] if effect is not None else []) + ["Result"]
    rows = [tuple(header)]
    for c in table.comparisons:
        docs = str(c.shared) if c.method == "paired" else f"{c.docs_a}/{c.docs_b}"
        record = None if c.wins is None else f"{c.wins}/{c.losses}/{c.ties}"
        method = c.method if c.method == "paired" else "unpaired (other docs)"
        result = {"A": f"{table.run_a} ahead", "B": f"{table.run_b} ahead", None: "within noise"}[c.better]
        row = [c.task, c.metric, method, docs, _number(c.difference), f"[{_number(c.low)}, {_number(c.high)}]"]
        row += [_number(c.p_value, 3), record or "", _number(c.sign_p, 3), _number(c.mde)]
        row += (
            [_number(c.noise), _number(c.p_runs, 3), _number(c.p_adjusted, 3)]
            + ([str(c.docs_for_effect or "")] if effect is not None else [])
            + [result]
        )
        rows.append(tuple(row))
    lines = [_aligned(rows, left={0, 1, 2, len(header) - 1})] if table.comparisons else []
    names = {"A ahead": f"{table.run_a} ahead", "B ahead": f"{table.run_b} ahead"}
    for task, (verdict, why) in table.verdicts.items():
        lines.append(f"  {task}: {names.get(verdict, verdict)} ({why})")
    return "\n".join(lines) if lines else table.note


def runs_table(found: list[RunsSignal]) -> str:
    """Signal and Noise across runs: per entry and metric each run's last-k score, signal, noise,
    SNR and whether the entry separates the runs; entries ranked by their best metric's SNR."""
    if not found:
        return ""
    names = list(found[0].scores)
    rows = [("Task", "Metric", "Step", *names, "Signal", "Noise", "SNR", "Separates")]
    for best in ranked(found):
        for item in [i for i in found if i.entry == best.entry]:
            scores = [_number(item.scores[name]) for name in names]
            cells = [_number(item.signal), _number(item.noise), _number(item.snr, 2), "yes" if item.separates else "no"]
            rows.append((item.entry, item.metric, str(item.step), *scores, *cells))
    return _aligned(rows, left={0, 1, len(rows[0]) - 1})
