"""`lighteval-nanotron torchrun`: torchrun for this package's commands, with a failure said in one line.

Usage:
    lighteval-nanotron torchrun --nproc-per-node 4 eval checkpoints/1000 --tp 2 --pp 2 --tasks tasks.txt
    lighteval-nanotron torchrun --nproc-per-node 8 train --config-file configs/llama_1b_train_with_eval.yaml
    # torchrun's own options first (--nnodes, --rdzv-endpoint, ...), then the command and its options

The same as `torchrun [options] -m lighteval_nanotron COMMAND ...`, except for what a failure prints:
plain torchrun follows the job's one `error:` line (printed by world rank 0) with its own report of
the failed workers, a traceback of `ChildFailedError` of about 40 lines. Here torchrun's agent runs
in this process and its report is left out: a worker that stopped with this package's error or an
unexpected one has said so in its one line; a worker killed by a signal is named in one line
(which rank, which signal). The exit status is the failed workers' (2: a problem with a fix, 1:
anything else). `--verbose` keeps torchrun's logs and report.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from lighteval_nanotron.console_errors import INTERNAL_ERROR, print_error
from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.nanotron_compat.console import is_verbose

AGENT_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")
"""torchrun's agent logs: the failed workers (at ERROR), the SIGTERMs it sends the others, its setup notes."""


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "torchrun",
        help="run a command on several processes with torchrun; a failure is one error line",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "torchrun_args",
        nargs=argparse.REMAINDER,
        metavar="[TORCHRUN OPTIONS] COMMAND ...",
        help="torchrun's options, then a lighteval-nanotron command (eval, train, ...) and its options",
    )
    parser.set_defaults(func=run)
    return parser


def split_command(argv: list[str], commands: set[str]) -> tuple[list[str], list[str]]:
    """(torchrun's options, the command and its options): the command is the first known verb."""
    for index, token in enumerate(argv):
        if token in commands:
            return argv[:index], argv[index:]
    raise ValueError(f"no command among {' '.join(argv) or '(nothing)'}: name one of {', '.join(sorted(commands))}")


def run(args: argparse.Namespace) -> int:
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        options, command = split_command(list(args.torchrun_args), set(args.commands))
    except ValueError as error:
        raise ConfigError(f"lighteval-nanotron torchrun: {error}.") from error
    torchrun_args = torchrun.parse_args([*options, "--module", "lighteval_nanotron", *command])
    if is_verbose():
        torchrun.run(torchrun_args)
        return 0
    for name in AGENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        torchrun.run(torchrun_args)
    except ChildFailedError as failed:
        return _exit_status(failed.failures)
    return 0


def _exit_status(failures: dict[int, Any]) -> int:
    """The job's status from its failed workers; one line for a worker killed by a signal (it said
    nothing itself). A worker that exited with a status has printed its error line."""
    first_rank = min(failures)
    failure = failures[first_rank]
    if failure.exitcode >= 0:
        return failure.exitcode
    try:
        name = signal.Signals(-failure.exitcode).name
    except ValueError:
        name = f"signal {-failure.exitcode}"
    oom = " (often the out-of-memory killer or a job limit)" if name == "SIGKILL" else ""
    print_error(f"world rank {first_rank} (pid {failure.pid}) was killed by {name}{oom}; the other ranks were stopped.")
    sys.stderr.flush()
    return INTERNAL_ERROR
