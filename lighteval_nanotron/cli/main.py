"""`lighteval-nanotron`: the command line (also `python -m lighteval_nanotron`).

Usage:
    lighteval-nanotron tasks list --suites lighteval,leaderboard
    lighteval-nanotron tasks inspect "lighteval|arc:easy|5" --num-docs 2 --data-dir bundled
    lighteval-nanotron report runs/demo/eval

Each verb lives in its own module of this package with a `register(subparsers)` function that
adds its parser and sets `func(args) -> int`; to add a verb, add its module to `COMMANDS`.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import importlib
import os
import sys

from lighteval_nanotron.console_errors import TRACEBACK_ENV, OneLineErrorParser, report_exception
from lighteval_nanotron.nanotron_compat.console import add_verbose_flag, log_to_the_console, quiet_process, set_verbose
from lighteval_nanotron.parallel.cpu_threads import prefer_passive_wait
from lighteval_nanotron.version import __version__

COMMANDS = (
    "lighteval_nanotron.cli.tasks_cmd",
    "lighteval_nanotron.cli.plot_cmd",
    "lighteval_nanotron.cli.report_cmd",
    "lighteval_nanotron.cli.convert_cmd",
    "lighteval_nanotron.cli.eval_cmd",
    "lighteval_nanotron.cli.options_cmd",
    "lighteval_nanotron.cli.train_cmd",
    "lighteval_nanotron.cli.bench_cmd",
    "lighteval_nanotron.cli.torchrun_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="lighteval-nanotron",
        description="Evaluate LLMs on benchmarks during Nanotron training, with lighteval's task API.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbose_flag(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMANDS:
        importlib.import_module(module_name).register(subparsers)
    for command in _command_parsers(parser):
        if "verbose" not in {action.dest for action in command._actions}:
            add_verbose_flag(command, top_level=False)
    return parser


def _command_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command's parser below `parser` (sub-commands too: `tasks list`, `convert gguf`)."""
    found = []
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for command in dict.fromkeys(getattr(action, "choices", {}).values()):
            found += [command, *_command_parsers(command)]
    return found


def _refuse_unknown_flags(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> None:
    """The one error line of flags `command` does not take, with its closest flags (a typo's fix)."""
    verb = next(found for found in _command_parsers(parser) if found.prog == f"{parser.prog} {command}")
    known = [
        flag
        for command_parser in [verb, *_command_parsers(verb)]
        for action in command_parser._actions
        for flag in action.option_strings
    ]
    close = [match for flag in unknown for match in difflib.get_close_matches(flag.split("=")[0], known, n=1)]
    hint = f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""
    verb.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def _verbs(parser: argparse.ArgumentParser) -> list[str]:
    """The verbs of `lighteval-nanotron` (eval, train, ...)."""
    (verbs,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return list(verbs.choices)


def main(argv: list[str] | None = None) -> int:
    return _run_verb(build_parser(), argv)


def _run_verb(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if args.command == "torchrun":  # everything after the verb is torchrun's and the command's, in order
        args.torchrun_args = argv[argv.index("torchrun") + 1 :]
        args.commands = [verb for verb in _verbs(parser) if verb != "torchrun"]
    elif unknown:
        _refuse_unknown_flags(parser, args.command, unknown)
    if args.verbose:
        set_verbose(True)  # spawned ranks and torchrun workers inherit it
        os.environ.setdefault(TRACEBACK_ENV, "1")
    quiet_process()
    if args.command != "train":  # Nanotron's trainer installs the training log's handler itself
        log_to_the_console(args.verbose)
    try:
        return int(args.func(args) or 0)
    except Exception as error:  # noqa: BLE001 - every failure ends in one error line, printed once
        return report_exception(error)


def run(argv: list[str] | None = None) -> int:
    """`main` as the process runs it (the `lighteval-nanotron` script, `python -m lighteval_nanotron`),
    telling the garbage collector what lives until the process ends (`gc.freeze`: frozen objects
    are left out of its passes; reference counting still frees them and runs their finalizers).

    Frozen first: every verb's modules, torch among them, imported to build the parser; the
    collector's full passes during an `eval` run then skip their objects (about 0.1 s of CPU).
    Frozen last: everything, so that the interpreter's exit, which collects every object it
    tracks while it tears its modules down, does not walk them again (0.3-0.4 s of CPU after an
    `eval` run, for memory the OS takes back anyway); atexit handlers still run and the loggers
    are closed before. Library code and tests call `main`, which leaves the collector alone.
    Before anything imports torch: CPU threads that sleep when they wait (`prefer_passive_wait`)."""
    prefer_passive_wait()
    parser = build_parser()
    gc.freeze()
    code = _run_verb(parser, argv)
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(run())
