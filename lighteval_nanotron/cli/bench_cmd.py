"""`lighteval-nanotron bench`: the engine benchmark of `benchmarks/bench_eval.py` (see its docstring).

Usage:
    OMP_NUM_THREADS=1 lighteval-nanotron bench --scale 0.05 --out bench_cpu.json
    lighteval-nanotron bench --layouts 1x1x1,1x2x1 --configs on,off,-pack_rows

Needs a source checkout (the benchmark lives in the repository's `benchmarks/` folder).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from lighteval_nanotron.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]


def _bench_module():
    if not (REPO_ROOT / "benchmarks" / "bench_eval.py").is_file():
        raise ConfigError(f"benchmarks/bench_eval.py not found under {REPO_ROOT}: run `bench` from a source checkout.")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("benchmarks.bench_eval")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `bench` verb to the `lighteval-nanotron` parser."""
    parser = subparsers.add_parser(
        "bench",
        help="benchmark the evaluation engine per layout and switch setting",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if (REPO_ROOT / "benchmarks" / "bench_eval.py").is_file():
        _bench_module().build_arg_parser(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    return _bench_module().main(parsed=args)
