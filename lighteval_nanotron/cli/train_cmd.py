"""`lighteval-nanotron train`: Nanotron training with evaluation in the loop.

Usage:
    torchrun --nproc_per_node 8 -m lighteval_nanotron train --config-file configs/llama_1b_train_with_eval.yaml
    OMP_NUM_THREADS=1 lighteval-nanotron train --config-file configs/tiny_cpu_train.yaml --cpu --nproc 4

Same as `python -m lighteval_nanotron.training.run_train`; the YAML's `lighteval_nanotron:` section
says what to evaluate and when (docs/hook.md).
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `train` verb to the `lighteval-nanotron` parser."""
    from lighteval_nanotron.training.run_train import build_parser, run

    parser = subparsers.add_parser(
        "train",
        help="train with Nanotron and evaluate at the configured steps",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build_parser(parser)
    parser.set_defaults(func=run)
    return parser
