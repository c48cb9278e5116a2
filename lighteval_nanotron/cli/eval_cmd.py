"""`lighteval-nanotron eval`: evaluate a saved Nanotron checkpoint, or backfill every checkpoint of a run.

Usage:
    # one checkpoint, 2 processes on CPU, tensor parallel 2 (any layout, not only the saved one)
    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m lighteval_nanotron eval checkpoints/1000 \\
        --tp 2 --cpu --tasks "lighteval|arc:easy|0,lighteval|piqa|0" --max-samples 100 --data-dir bundled

    # every step folder of a training run, in step order, skipping steps already in --output-dir
    torchrun --nproc-per-node 8 -m lighteval_nanotron eval --checkpoints-dir checkpoints \\
        --tp 2 --pp 2 --dp 2 --tasks tasks.txt --output-dir eval_results

    # follow a running training: each checkpoint once complete, until its last one (or a stop file, SIGTERM)
    torchrun --nproc-per-node 2 -m lighteval_nanotron eval --checkpoints-dir checkpoints --watch \
        --tp 2 --tasks tasks.txt --output-dir eval_results --stop-file eval_results/STOP

    # a single process needs no torchrun
    lighteval-nanotron eval checkpoints/1000 --cpu --tasks "lighteval|hellaswag|0" --max-samples 50

    # as `lighteval nanotron`: the checkpoint's config.yaml and lighteval's eval YAML
    torchrun --nproc-per-node 2 -m lighteval_nanotron eval --checkpoint-config-path checkpoints/1000/config.yaml \
        --lighteval-config-path eval.yaml

tp x pp x dp must equal the number of processes. Results go to
<output-dir>/results/<model>/<step>/results_<date>.json and
details/<model>/<step>/<date>/details_<task>_<date>.parquet (lighteval's layout), as with the
training hook. See docs/eval.md and docs/tracking.md.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from lighteval_nanotron.errors import ConfigError

DTYPE_CHOICES = ("float32", "bfloat16", "float16")
LOGGER_CHOICES = ("json", "details", "tensorboard", "wandb")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `eval` verb to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a Nanotron checkpoint (or every checkpoint of a run) at any TP/PP/DP layout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("checkpoint", nargs="?", default=None, help="a checkpoint folder (e.g. checkpoints/1000)")
    source.add_argument(
        "--checkpoint-config-path", default=None, help="a checkpoint's config.yaml (as lighteval nanotron): its folder"
    )
    source.add_argument(
        "--checkpoints-dir", default=None, help="evaluate every numbered step folder in it, skipping steps already done"
    )
    parser.add_argument(
        "--lighteval-config-path",
        default=None,
        help="lighteval's eval YAML (lighteval nanotron's): its fields set the options below (docs/eval.md)",
    )
    parser.add_argument("--tasks", default=None, help="task specs ('suite|task|k,...') or a file of specs")
    parser.add_argument("--custom-tasks", default=None, help="Python file or module with a TASKS_TABLE")
    parser.add_argument("--max-samples", type=int, default=None, help="at most this many docs per task")
    parser.add_argument(
        "--fewshot-draws",
        choices=["lighteval", "per_doc"],
        default=None,
        help="few-shot draws for every task (default: lighteval for lighteval's suites, per_doc for custom tasks)",
    )
    parser.add_argument("--output-dir", default=None, help="results folder (default: eval_results)")
    parser.add_argument("--model-name", default=None, help="name in the results paths (default: as the training hook)")
    parser.add_argument("--tp", type=int, default=None, help="tensor parallel size (default 1)")
    parser.add_argument("--pp", type=int, default=None, help="pipeline parallel size (default 1)")
    parser.add_argument("--dp", type=int, default=None, help="data parallel size (default 1)")
    parser.add_argument("--cpu", action="store_true", default=None, help="CPU with gloo (default: CUDA with NCCL)")
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default=None, help="default: the checkpoint's dtype")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the checkpoint's)")
    parser.add_argument(
        "--data-dir",
        action="append",
        default=[],
        help="data dir searched before $LIGHTEVAL_NANOTRON_DATA_DIRS (repeatable; 'bundled' for the shipped slices)",
    )
    parser.add_argument("--tokens-per-batch", type=int, default=None, help="token budget of one micro-batch (8192)")
    parser.add_argument(
        "--use-chat-template", action="store_true", default=None, help="prompts through the tokenizer's chat template"
    )
    parser.add_argument("--system-prompt", default=None, help="system prompt (system turn with --use-chat-template)")
    parser.add_argument(
        "--pairwise-tokenization",
        action="store_true",
        default=None,
        help="tokenize context and continuation separately (lighteval's pairwise_tokenization)",
    )
    parser.add_argument(
        "--multichoice-continuations-start-space",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add (or with --no-..., strip) a leading space on every choice (default: choices as written)",
    )
    sampling = parser.add_argument_group("generation (default: greedy)")
    sampling.add_argument("--temperature", type=float, default=None, help="sampling temperature (0: greedy)")
    sampling.add_argument("--top-k", type=int, default=None, help="sample from the k most likely tokens (0: off)")
    sampling.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1] (1: off)")
    sampling.add_argument("--num-samples", type=int, default=None, help="generations per doc (needs --temperature)")
    sampling.add_argument("--seed", type=int, default=None, help="sampling seed (default 0)")
    parser.add_argument(
        "--failure-timeout-s",
        type=float,
        default=None,
        help="seconds any wait on another rank may take before the evaluation stops with an error (default 1800)",
    )
    parser.add_argument(
        "--loggers",
        nargs="+",
        choices=LOGGER_CHOICES,
        default=None,
        help="where results go (default: json details tensorboard)",
    )
    parser.add_argument("--tensorboard-prefix", default=None, help="TensorBoard tag prefix (default: eval)")
    parser.add_argument("--wandb-project", default=None, help="W&B project (default: $WANDB_PROJECT)")
    parser.add_argument("--wandb-entity", default=None, help="W&B entity (default: yours)")
    parser.add_argument(
        "--no-progress", action="store_true", default=None, help="no progress bar (it only shows on a terminal anyway)"
    )
    watch = parser.add_argument_group("following a running training (--checkpoints-dir DIR --watch)")
    watch.add_argument(
        "--watch",
        action="store_true",
        help="keep following --checkpoints-dir: evaluate each checkpoint once complete, until the training's last one",
    )
    watch.add_argument("--poll-interval-s", type=float, default=30.0, help="seconds between looks at the folder (30)")
    watch.add_argument(
        "--settle-s", type=float, default=60.0, help="seconds a checkpoint's files must stay unchanged (60)"
    )
    watch.add_argument(
        "--skip-to-newest", action="store_true", help="when behind, evaluate the newest checkpoint, not the oldest"
    )
    watch.add_argument(
        "--stop-file", default=None, help="stop (after the evaluation in progress) once this file exists"
    )
    parser.set_defaults(func=run)
    return parser


FLAG_OPTIONS = (
    "tasks", "checkpoint", "checkpoints_dir", "tp", "pp", "dp", "cpu", "dtype", "tokenizer", "custom_tasks",
    "max_samples", "fewshot_draws", "tokens_per_batch", "use_chat_template", "system_prompt",
    "pairwise_tokenization", "multichoice_continuations_start_space", "output_dir", "model_name",
    "tensorboard_prefix", "wandb_project", "wandb_entity", "failure_timeout_s",
)  # fmt: skip
"""`CheckpointEvalConfig` options set by the flag of the same name (a flag not given is left out)."""
GENERATION_FLAGS = ("temperature", "top_k", "top_p", "num_samples", "seed")
"""Flags that make up `CheckpointEvalConfig.generation` (a lighteval YAML `generation:` section sets the same)."""


def _given_flags(args: argparse.Namespace) -> dict[str, Any]:
    flags = {name: getattr(args, name) for name in FLAG_OPTIONS if getattr(args, name) is not None}
    if args.data_dir:
        flags["data_dirs"] = list(args.data_dir)
    if args.loggers is not None:
        flags["loggers"] = list(args.loggers)
    if args.no_progress:
        flags["progress_bar"] = False
    generation = {name: getattr(args, name) for name in GENERATION_FLAGS if getattr(args, name) is not None}
    if generation:
        flags["generation"] = generation
    return flags


def watch_flags(args: argparse.Namespace) -> list[str]:
    """The watch flags given with values other than their defaults."""
    defaults = {"poll_interval_s": 30.0, "settle_s": 60.0, "skip_to_newest": False, "stop_file": None}
    return [f"--{name.replace('_', '-')}" for name, default in defaults.items() if getattr(args, name) != default]


def _watch(args: argparse.Namespace, config: Any, show: Any) -> int:
    from lighteval_nanotron.checkpoint_eval.watch import WatchOptions, watch_checkpoints

    options = WatchOptions(args.poll_interval_s, args.settle_s, args.skip_to_newest, args.stop_file)
    watch_checkpoints(config, options, on_result=show, notify=lambda line: print(line, flush=True))
    return 0


def run(args: argparse.Namespace) -> int:
    from lighteval_nanotron.checkpoint_eval import evaluate_checkpoints
    from lighteval_nanotron.checkpoint_eval.lighteval_config import eval_config
    from lighteval_nanotron.tracking import format_results_table, results_path

    config = eval_config(_given_flags(args), args.checkpoint_config_path, args.lighteval_config_path)

    def show(result) -> None:
        print(format_results_table(result), flush=True)
        if "json" in config.loggers:
            print(f"results: {results_path(config.output_dir, result)}", flush=True)

    if args.watch:
        return _watch(args, config, show)
    if watch_flags(args):
        given = watch_flags(args)
        raise ConfigError(f"{', '.join(given)} only {'apply' if len(given) > 1 else 'applies'} with --watch: add it.")
    report = evaluate_checkpoints(config, on_result=show)
    if os.environ.get("RANK", "0") == "0" and report.skipped_steps:
        print(f"skipped steps with results already in {config.output_dir}: {report.skipped_steps}", flush=True)
    return 0
