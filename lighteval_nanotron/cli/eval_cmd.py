"""`lighteval-nanotron eval`: evaluate a saved Nanotron checkpoint, or backfill every checkpoint of a run.

Usage:
    # one checkpoint, 2 processes on CPU, tensor parallel 2 (any layout, not only the saved one)
    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m lighteval_nanotron eval checkpoints/1000 \\
        --tp 2 --cpu --tasks "lighteval|arc:easy|0,lighteval|piqa|0" --max-samples 100 --data-dir bundled

    # every step folder of a training run, in step order, skipping steps already in --output-dir
    torchrun --nproc-per-node 8 -m lighteval_nanotron eval --checkpoints-dir checkpoints \\
        --tp 2 --pp 2 --dp 2 --tasks tasks.txt --output-dir eval_results

    # follow a running training: each checkpoint once complete, until its last one (or a stop file, SIGTERM)
    torchrun --nproc-per-node 2 -m lighteval_nanotron eval --checkpoints-dir checkpoints --watch \\
        --tp 2 --tasks tasks.txt --output-dir eval_results --stop-file eval_results/STOP

    # a single process needs no torchrun
    lighteval-nanotron eval checkpoints/1000 --cpu --tasks "lighteval|hellaswag|0" --max-samples 50

    # as `lighteval nanotron`: the checkpoint's config.yaml and lighteval's eval YAML
    torchrun --nproc-per-node 2 -m lighteval_nanotron eval --checkpoint-config-path checkpoints/1000/config.yaml \\
        --lighteval-config-path eval.yaml

Every option of the training hook's `lighteval_nanotron:` section has a flag here (generated from
`CheckpointEvalConfig`, see docs/options.md). tp x pp x dp must equal the number of processes. Results go to
<output-dir>/results/<model>/<step>/results_<date>.json and
details/<model>/<step>/<date>/details_<task>_<date>.parquet (lighteval's layout), as with the
training hook. See docs/eval.md and docs/tracking.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

SOURCE = ("checkpoint", "checkpoints_dir")
"""The options naming what to evaluate: one of them, or --checkpoint-config-path."""


def _groups() -> dict[str, list[str]]:
    """`{group title: option names}`: the options of `CheckpointEvalConfig` by the class that declares them."""
    from lighteval_nanotron.options.base import declaring_class, first_sentence
    from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig

    groups: dict[str, list[str]] = {}
    for owner in CheckpointEvalConfig.__mro__:  # eval's own options first, then the shared ones
        names = [
            field.name
            for field in dataclasses.fields(CheckpointEvalConfig)
            if field.name not in SOURCE and declaring_class(CheckpointEvalConfig, field.name) is owner
        ]
        if names:
            groups[first_sentence(owner.__doc__ or owner.__name__)] = names
    return groups


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `eval` verb to the `lighteval-nanotron` parser."""
    from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.options.flags import add_flags

    parser = subparsers.add_parser(
        "eval",
        help="evaluate a Nanotron checkpoint (or every checkpoint of a run) at any TP/PP/DP layout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group()
    add_flags(source, CheckpointEvalConfig, ["checkpoint"])
    source.add_argument(
        "--checkpoint-config-path", default=None, help="a checkpoint's config.yaml (as lighteval nanotron): its folder"
    )
    add_flags(source, CheckpointEvalConfig, ["checkpoints_dir"])
    parser.add_argument(
        "--lighteval-config-path",
        default=None,
        help="lighteval's eval YAML (lighteval nanotron's): its fields set the options below (docs/eval.md)",
    )
    for title, names in _groups().items():
        add_flags(parser.add_argument_group(title), CheckpointEvalConfig, names)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig, evaluate_checkpoints
    from lighteval_nanotron.lighteval_compat.eval_config import eval_config
    from lighteval_nanotron.options.flags import given_options
    from lighteval_nanotron.tracking import format_results_table, results_path

    names = [field.name for field in dataclasses.fields(CheckpointEvalConfig)]
    flags = given_options(args, CheckpointEvalConfig, names)
    config = eval_config(flags, args.checkpoint_config_path, args.lighteval_config_path)

    def show(result) -> None:
        print(format_results_table(result), flush=True)
        if "json" in config.loggers:
            print(f"results: {results_path(config.output_dir, result)}", flush=True)

    config.check_watch()
    if config.watch:
        from lighteval_nanotron.checkpoint_eval.watch import watch_checkpoints

        watch_checkpoints(config, on_result=show, notify=lambda line: print(line, flush=True))
        return 0
    report = evaluate_checkpoints(config, on_result=show)
    if os.environ.get("RANK", "0") == "0" and report.skipped_steps:
        print(f"skipped steps with results already in {config.output_dir}: {report.skipped_steps}", flush=True)
    return 0
