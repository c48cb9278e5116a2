"""`lighteval-nanotron plot`: metric curves across training steps from a results folder.

Usage:
    lighteval-nanotron plot eval_results --output-dir eval_results/plots
    lighteval-nanotron plot eval_results/results/my-run --grid --tasks "lighteval|arc:easy|0" --metrics acc

RESULTS is an output folder, a `results/<model>` folder or one results file; every
`results_*.json` with a training step found below it is one point. One PNG per task (a panel per metric), or a
single grid with --grid; each model is a line, the band is ± one standard error.
"""

from __future__ import annotations

import argparse
import sys

from lighteval_nanotron.console_errors import OneLineErrorParser
from lighteval_nanotron.options.flags import expanded_path
from lighteval_nanotron.tracking.plot import History, load_history, plot_history


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `plot` verb to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "plot",
        help="plot metric curves across training steps from results files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("results", type=expanded_path, help="output folder, results/<model> folder or results file")
    parser.add_argument("--output-dir", type=expanded_path, default=None, help="PNG folder (default: RESULTS/plots)")
    parser.add_argument("--grid", action="store_true", help="one grid image instead of one PNG per task")
    parser.add_argument("--tasks", type=_csv, default=None, help="comma-separated full task names to keep")
    parser.add_argument("--metrics", type=_csv, default=None, help="comma-separated metric names to keep")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if not args.results.exists():
        print(f"error: {args.results} does not exist: pass the evaluation output folder.", file=sys.stderr)
        return 2
    output_dir = args.output_dir
    if output_dir is None:
        output_dir = (args.results.parent if args.results.is_file() else args.results) / "plots"
    history = load_history(args.results)
    unknown = _unknown_names(history, args.tasks, args.metrics)
    if unknown:
        print(f"error: {unknown}", file=sys.stderr)
        return 2
    try:
        paths = plot_history(history, output_dir, grid=args.grid, tasks=args.tasks, metrics=args.metrics)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _unknown_names(history: History, tasks: list[str] | None, metrics: list[str] | None) -> str | None:
    """What --tasks / --metrics name that no results file holds, with what the files do hold."""
    found_tasks = sorted({task for model_tasks in history.values() for task in model_tasks})
    found_metrics = sorted(
        {metric for model_tasks in history.values() for scores in model_tasks.values() for metric in scores}
    )
    if not found_tasks:
        return "no results file with a training step was found there: pass the evaluation output folder."
    missing_tasks = [task for task in tasks or [] if task not in found_tasks]
    if missing_tasks:
        return f"no results for task(s) {', '.join(missing_tasks)}: the results hold {', '.join(found_tasks)}."
    missing_metrics = [metric for metric in metrics or [] if metric not in found_metrics]
    if missing_metrics:
        return f"no results for metric(s) {', '.join(missing_metrics)}: the results hold {', '.join(found_metrics)}."
    return None


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="lighteval-nanotron")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
