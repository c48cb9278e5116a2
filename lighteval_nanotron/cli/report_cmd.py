"""`lighteval-nanotron report`: which numbers carry signal, and which run is ahead.

Usage:
    lighteval-nanotron report runs/demo/eval
    lighteval-nanotron report eval_results/run_a eval_results/run_b --output report.png --window 5

Each RESULTS_DIR is an evaluation output folder (the hook's `output_dir`, `eval --output-dir`),
its `results/<model>` folder or one results file; every model found in it is a run. For each run
it prints, per task and metric, the latest value and standard error, the smoothed trend, the
step-to-step noise, signal-to-noise, monotonicity, the distance from chance in standard errors, the
minimum detectable effect (MDE80) and a verdict (informative / not yet above chance /
noise-dominated / saturated / too few evaluations). With several runs, per pair: whether one
run's trend is ahead beyond their noise, and doc by doc from the per-doc details (at the last
common step and over the mean of the last --last common evaluations): the difference, a paired
bootstrap 95% interval, p-values (raw and Holm-adjusted over the table), wins/losses/ties, a sign
test, the MDE80 (and with --effect, the docs that difference needs) and one verdict per task.
With three runs or more, the Signal-and-Noise signal, noise and SNR per task and metric, ranked,
and which tasks separate these runs. --json prints every number of the tables as JSON instead.
It writes one PNG: per task the accuracy and the gold answer's metric side by side, each run's
evaluations with its trend and noise band. Definitions: docs/signal.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

from lighteval_nanotron.analysis import Comparison, SignalSettings, compare_runs, load_runs, signal_section
from lighteval_nanotron.analysis.across_runs import DEFAULT_LAST, RunsSignal, recommendation, runs_signal
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.paired import ALPHA, MIN_SHARED, RESAMPLES
from lighteval_nanotron.analysis.per_doc import PairTable, compare_pair
from lighteval_nanotron.analysis.report_plot import plot_report
from lighteval_nanotron.analysis.report_table import (
    comparison_table,
    paired_table,
    runs_table,
    signal_table,
)
from lighteval_nanotron.options.flags import expanded_path

DEFAULTS = SignalSettings()


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `report` verb to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "report",
        help="signal per task and metric across a run (and runs compared), as a table and one PNG",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "results", type=expanded_path, nargs="+", metavar="RESULTS_DIR", help="evaluation output folder(s)"
    )
    parser.add_argument(
        "--output",
        type=expanded_path,
        default=None,
        help="the PNG (default: RESULTS_DIR/plots/report.png; ./report.png for several)",
    )
    parser.add_argument(
        "--window", type=int, default=DEFAULTS.window, help="evaluations the trend is fitted on (default: %(default)s)"
    )
    parser.add_argument(
        "--min-evaluations",
        type=int,
        default=DEFAULTS.min_evaluations,
        help="fewer give 'too few evaluations' (default: %(default)s)",
    )
    parser.add_argument(
        "--snr-threshold",
        type=float,
        default=DEFAULTS.snr_threshold,
        help="signal-to-noise of an informative series (default: %(default)s)",
    )
    parser.add_argument(
        "--last",
        type=int,
        default=DEFAULT_LAST,
        help="evaluations averaged: two runs doc by doc over their last N common ones, several runs' scores "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--effect",
        type=float,
        default=None,
        help="a difference to detect, in the metric's units: the docs it needs, per task and metric (default: none)",
    )
    parser.add_argument(
        "--seed-runs",
        type=expanded_path,
        nargs="+",
        default=[],
        metavar="RESULTS_DIR",
        help="runs of one config at other seeds (at least 2): their spread joins the noise of the doc-by-doc "
        "verdicts, which then speak for configs, not only for these runs (default: none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the paired bootstrap's seed (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="every number of the tables as JSON on stdout")
    parser.set_defaults(func=run)
    return parser


def _collect(paths: list[Path]) -> list[RunHistory]:
    """The runs of every folder; a model name found in two folders is told apart by its folder."""
    found: list[tuple[Path, RunHistory]] = [(path, run) for path in paths for run in load_runs(path).values()]
    names = [run.name for _, run in found]
    for path, run in found:
        if names.count(run.name) > 1:
            run.name = f"{run.name} ({path})"
    return [run for _, run in found]


def run(args: argparse.Namespace) -> int:
    missing = [str(path) for path in [*args.results, *args.seed_runs] if not path.exists()]
    if missing:
        print(f"error: {', '.join(missing)} does not exist: pass evaluation output folders.", file=sys.stderr)
        return 2
    try:
        settings = SignalSettings(
            window=args.window, min_evaluations=args.min_evaluations, snr_threshold=args.snr_threshold
        )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.last < 2:
        print(f"error: --last {args.last}: average at least 2 evaluations (default {DEFAULT_LAST}).", file=sys.stderr)
        return 2
    if args.effect is not None and not (math.isfinite(args.effect) and args.effect > 0):
        print(f"error: --effect {args.effect}: use a positive difference in the metric's units.", file=sys.stderr)
        return 2
    runs, seed_runs = _collect(args.results), _collect(args.seed_runs)
    if not runs:
        where = ", ".join(str(path) for path in args.results)
        print(f"error: no results file with a training step under {where}.", file=sys.stderr)
        return 2
    if args.seed_runs and len(seed_runs) < 2:
        print(
            f"error: --seed-runs: {len(seed_runs)} run found; the spread across seeds needs 2 or more.", file=sys.stderr
        )
        return 2
    comparisons = compare_runs(runs, settings) if len(runs) > 1 else []
    pairs = [
        table
        for run_a, run_b in combinations(runs, 2)
        for table in compare_pair(run_a, run_b, args.last, args.seed, args.effect, settings, seed_runs)
    ]
    across = runs_signal(runs, args.last) if len(runs) > 2 else []
    if not args.json:
        _print_tables(runs, settings, comparisons, pairs, across, args)
    output = args.output
    if output is None:
        single = args.results[0]
        output = (
            (single.parent if single.is_file() else single) / "plots" / "report.png"
            if len(args.results) == 1
            else Path("report.png")
        )
    path = plot_report(runs, output, settings, comparisons)
    if args.json:
        print(json.dumps(report_json(runs, settings, comparisons, pairs, across, path), indent=1, allow_nan=False))
    else:
        print(f"\nReport image: {path}")
    return 0


def _print_tables(
    runs: list[RunHistory],
    settings: SignalSettings,
    comparisons: list[Comparison],
    pairs: list[PairTable],
    across: list[RunsSignal],
    args: argparse.Namespace,
) -> None:
    for history in runs:
        steps = sorted({p.step for series in history.series.values() for p in series.points})
        print(f"\n{history.name}: {len(steps)} evaluations, steps {steps[0]}..{steps[-1]}\n")
        print(signal_table(history, settings))
    if comparisons:
        print("\nRuns compared at the last step both reached (ahead: trends apart by > 2 combined noises)\n")
        print(comparison_table(comparisons))
    for table in pairs:
        where = f"step {table.steps[0]}" if len(table.steps) == 1 else f"the mean of steps {table.steps}"
        seeds = (
            f"the spread of {len(args.seed_runs)} seed runs"
            if args.seed_runs
            else "no seeds (no --seed-runs: a verdict is about these two runs, not their configs; docs/signal.md, "
            "Calibration)"
        )
        print(
            f"\n{table.run_a} (A) vs {table.run_b} (B) doc by doc at {where}: paired bootstrap ({RESAMPLES} "
            f"resamples, seed {args.seed}) over the docs; ahead when the difference is beyond the docs', the "
            f"checkpoints' and {seeds} noise, Holm's method over the {len(table.comparisons)} comparisons "
            f"(family-wise {ALPHA:.0%})\n"
        )
        print(paired_table(table, args.effect))
    if across:
        print(
            f"\nSignal and noise across the {len(runs)} runs (Heineman et al. 2025; "
            f"mean of the last {args.last} evaluations)\n"
        )
        print(runs_table(across))
        print("\n" + recommendation(across))


def report_json(
    runs: list[RunHistory],
    settings: SignalSettings,
    comparisons: list[Comparison],
    pairs: list[PairTable],
    across: list[RunsSignal],
    image: Path,
) -> dict:
    """Every number of the printed tables (infinities as null)."""
    return _finite(
        {
            "runs": {run.name: signal_section(run, settings) for run in runs},
            "trend_comparisons": [
                {
                    "entry": c.entry,
                    "metric": c.metric,
                    "run_a": c.run_a,
                    "run_b": c.run_b,
                    "step": c.step,
                    "a_trend": c.a.trend_at(c.step),
                    "b_trend": c.b.trend_at(c.step),
                    "difference": c.difference,
                    "combined_noise": c.combined_noise,
                    "result": c.note,
                }
                for c in comparisons
            ],
            "paired": [table.to_dict() for table in pairs],
            "paired_method": {
                "resamples": RESAMPLES,
                "min_shared_docs": MIN_SHARED,
                "alpha": ALPHA,
                "multiple_comparisons": "Holm (family-wise) per table, over p_runs",
            },
            "across_runs": [item.to_dict() for item in across],
            "across_runs_recommendation": recommendation(across) if across else None,
            "image": str(image),
        }
    )


def _finite(value: Any) -> Any:
    """NaN and infinities as None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
