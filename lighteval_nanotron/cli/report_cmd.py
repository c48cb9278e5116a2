"""`lighteval-nanotron report`: which numbers carry signal, and which run is ahead.

Usage:
    lighteval-nanotron report runs/demo/eval
    lighteval-nanotron report eval_results/run_a eval_results/run_b --output report.png --window 5

Each RESULTS_DIR is an evaluation output folder (the hook's `output_dir`, `eval --output-dir`),
its `results/<model>` folder or one results file; every model found in it is a run. For each run
it prints, per task and metric, the latest value and standard error, the smoothed trend, the
step-to-step noise, signal-to-noise, monotonicity, the distance from chance in standard errors and
a verdict (informative / not yet above chance / noise-dominated / saturated / too few
evaluations); with several runs, per task and metric whether one run is ahead of another beyond
their noise. It writes one PNG: per task the accuracy and the gold answer's metric side by side,
each run's evaluations with its trend and noise band. Definitions: docs/signal.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lighteval_nanotron.analysis import SignalSettings, compare_runs, load_runs
from lighteval_nanotron.analysis.history import RunHistory
from lighteval_nanotron.analysis.report_plot import plot_report
from lighteval_nanotron.analysis.report_table import comparison_table, signal_table
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
    missing = [str(path) for path in args.results if not path.exists()]
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
    runs = _collect(args.results)
    if not runs:
        where = ", ".join(str(path) for path in args.results)
        print(f"error: no results file with a training step under {where}.", file=sys.stderr)
        return 2
    for history in runs:
        steps = sorted({p.step for series in history.series.values() for p in series.points})
        print(f"\n{history.name}: {len(steps)} evaluations, steps {steps[0]}..{steps[-1]}\n")
        print(signal_table(history, settings))
    comparisons = compare_runs(runs, settings) if len(runs) > 1 else []
    if comparisons:
        print("\nRuns compared at the last step both reached (ahead: trends apart by > 2 combined noises)\n")
        print(comparison_table(comparisons))
    output = args.output
    if output is None:
        single = args.results[0]
        output = (
            (single.parent if single.is_file() else single) / "plots" / "report.png"
            if len(args.results) == 1
            else Path("report.png")
        )
    path = plot_report(runs, output, settings, comparisons)
    print(f"\nReport image: {path}")
    return 0
