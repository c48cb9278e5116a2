"""`lighteval-nanotron eval`: evaluate a saved Nanotron checkpoint, or backfill every checkpoint of a run.

Usage:
    # one checkpoint, 2 processes on CPU, tensor parallel 2 (any layout, not only the saved one)
    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 -m lighteval_nanotron eval checkpoints/1000 \\
        --tp 2 --cpu --tasks "lighteval|arc:easy|0,lighteval|piqa|0" --max-samples 100 --data-dir bundled

    # every step folder of a training run, in step order, skipping steps already in --output-dir
    torchrun --nproc-per-node 8 -m lighteval_nanotron eval --checkpoints-dir checkpoints \\
        --tp 2 --pp 2 --dp 2 --tasks tasks.txt --output-dir eval_results

    # a single process needs no torchrun
    lighteval-nanotron eval checkpoints/1000 --cpu --tasks "lighteval|hellaswag|0" --max-samples 50

tp x pp x dp must equal the number of processes. Results go to
<output-dir>/results/<model>/results_<step>.json and details/<model>/<step>/details_<task>.parquet,
as with the training hook. See docs/eval.md.
"""

from __future__ import annotations

import argparse
import os

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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("checkpoint", nargs="?", default=None, help="a checkpoint folder (e.g. checkpoints/1000)")
    source.add_argument(
        "--checkpoints-dir", default=None, help="evaluate every numbered step folder in it, skipping steps already done"
    )
    parser.add_argument("--tasks", required=True, help="task specs ('suite|task|k,...') or a file of specs")
    parser.add_argument("--custom-tasks", default=None, help="Python file or module with a TASKS_TABLE")
    parser.add_argument("--max-samples", type=int, default=None, help="at most this many docs per task")
    parser.add_argument(
        "--fewshot-draws",
        choices=["lighteval", "per_doc"],
        default=None,
        help="few-shot draws for every task (default: lighteval for lighteval's suites, per_doc for custom tasks)",
    )
    parser.add_argument("--output-dir", default="eval_results", help="results folder (default: eval_results)")
    parser.add_argument("--model-name", default=None, help="name in the results paths (default: as the training hook)")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallel size")
    parser.add_argument("--dp", type=int, default=1, help="data parallel size")
    parser.add_argument("--cpu", action="store_true", help="run on CPU with gloo (default: CUDA with NCCL)")
    parser.add_argument("--dtype", choices=DTYPE_CHOICES, default=None, help="default: the checkpoint's dtype")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the checkpoint's)")
    parser.add_argument(
        "--data-dir",
        action="append",
        default=[],
        help="data dir searched before $LIGHTEVAL_NANOTRON_DATA_DIRS (repeatable; 'bundled' for the shipped slices)",
    )
    parser.add_argument("--tokens-per-batch", type=int, default=8192, help="token budget of one micro-batch")
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
        default=["json", "details", "tensorboard"],
        help="where results go (default: json details tensorboard)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (it only shows on a terminal anyway)"
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig, evaluate_checkpoints
    from lighteval_nanotron.tracking import format_results_table, results_path

    config = CheckpointEvalConfig(
        tasks=args.tasks,
        checkpoint=args.checkpoint,
        checkpoints_dir=args.checkpoints_dir,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        cpu=args.cpu,
        dtype=args.dtype,
        tokenizer=args.tokenizer,
        custom_tasks=args.custom_tasks,
        max_samples=args.max_samples,
        fewshot_draws=args.fewshot_draws,
        data_dirs=list(args.data_dir),
        tokens_per_batch=args.tokens_per_batch,
        generation={
            name: getattr(args, name)
            for name in ("temperature", "top_k", "top_p", "num_samples", "seed")
            if getattr(args, name) is not None
        },
        output_dir=args.output_dir,
        model_name=args.model_name,
        loggers=list(args.loggers),
        **({} if args.failure_timeout_s is None else {"failure_timeout_s": args.failure_timeout_s}),
        progress_bar=not args.no_progress,
    )

    def show(result) -> None:
        print(format_results_table(result), flush=True)
        if "json" in config.loggers:
            print(f"results: {results_path(config.output_dir, result)}", flush=True)

    report = evaluate_checkpoints(config, on_result=show)
    if os.environ.get("RANK", "0") == "0" and report.skipped_steps:
        print(f"skipped steps with results already in {config.output_dir}: {report.skipped_steps}", flush=True)
    return 0
