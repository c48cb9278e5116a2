"""`lighteval-nanotron`: the command line (also `python -m lighteval_nanotron`).

Usage:
    lighteval-nanotron tasks list --suites lighteval,leaderboard
    lighteval-nanotron tasks inspect "lighteval|arc:easy|5" --num-docs 2 --data-dir bundled

Each verb lives in its own module of this package with a `register(subparsers)` function that
adds its parser and sets `func(args) -> int`; to add a verb, add its module to `COMMANDS`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys
from typing import NoReturn

from lighteval_nanotron import __version__
from lighteval_nanotron.errors import LightevalNanotronError

COMMANDS = (
    "lighteval_nanotron.cli.tasks_cmd",
    "lighteval_nanotron.cli.plot_cmd",
    "lighteval_nanotron.cli.convert_cmd",
    "lighteval_nanotron.cli.eval_cmd",
    "lighteval_nanotron.cli.train_cmd",
    "lighteval_nanotron.cli.bench_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lighteval-nanotron",
        description="Evaluate LLMs on benchmarks during Nanotron training, with lighteval's task API.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMANDS:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except LightevalNanotronError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def exit_process(code: int) -> NoReturn:
    """End the process with `code`, without the interpreter's last garbage collections.

    At exit Python collects every object it tracks while it tears its modules down: 0.3-0.4 s
    of CPU after an `eval` run (torch's and the libraries' object graphs), for memory the OS
    takes back anyway. Frozen objects are left out of those collections; atexit handlers,
    `finally` blocks and reference-count finalizers still run (the loggers are closed before)."""
    gc.freeze()
    sys.exit(code)


def run() -> NoReturn:
    """The process entry point (the `lighteval-nanotron` script, `python -m lighteval_nanotron`)."""
    exit_process(main())


if __name__ == "__main__":
    run()
