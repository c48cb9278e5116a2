"""How a failure ends on the console: one `error:` line, printed once.

- An error of this library (`LightevalNanotronError`: a bad input, a refused checkpoint, an agreed
  evaluation failure) names the problem and the fix; every rank has it (agreed or computed the same
  way), so world rank 0 alone prints it. Exit status 2.
- Anything else (a bug, an error of a library underneath) is printed by each rank that has it,
  with its rank, type, message and where it was raised. Exit status 1. Its traceback is printed
  first only when asked for: `LIGHTEVAL_NANOTRON_TRACEBACK=1` (or `lighteval-nanotron -v`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import NoReturn

from lighteval_nanotron.errors import LightevalNanotronError

TRACEBACK_ENV = "LIGHTEVAL_NANOTRON_TRACEBACK"
USAGE_ERROR = 2
"""Exit status of a run stopped by one of this library's errors (a problem with a fix)."""
INTERNAL_ERROR = 1
"""Exit status of a run stopped by anything else."""


VERBOSE_ENV = "LIGHTEVAL_NANOTRON_VERBOSE"
"""`--verbose` for this process and the processes it starts (nanotron_compat/console.py says what it shows)."""


def is_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def set_verbose(on: bool) -> None:
    """Verbose (or not) for this process and every process it starts."""
    if on:
        os.environ[VERBOSE_ENV] = "1"
    else:
        os.environ.pop(VERBOSE_ENV, None)


def wants_traceback() -> bool:
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _world_rank() -> str:
    return os.environ.get("RANK", "0")


LAUNCHED_BY = ("TORCHELASTIC_RUN_ID", "SLURM_PROCID")
"""Set in the workers of torchrun and srun, which stop a job's other processes when one fails."""
RANK0_GRACE_S = 10.0
"""How long another rank of a launched job waits for world rank 0 to print the error they share."""


def print_error(message: str) -> None:
    """`error: <message>` as one line on stderr, on world rank 0 only (RANK unset: this process).

    Under torchrun or srun another rank that stops first would have the launcher stop world rank 0
    before it printed: it waits `RANK0_GRACE_S` for rank 0 to end the job (the launcher then stops
    it), and prints the error itself, with its rank, only if rank 0 did not (an error of its own)."""
    rank = _world_rank()
    if rank == "0":
        print(f"error: {one_line(message)}", file=sys.stderr, flush=True)
    elif any(name in os.environ for name in LAUNCHED_BY):
        time.sleep(RANK0_GRACE_S)
        print(f"error: world rank {rank}: {one_line(message)}", file=sys.stderr, flush=True)


def describe(error: BaseException) -> str:
    """`Type: message (at file:line)` of an exception."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def report_exception(error: BaseException) -> int:
    """Say `error` as the rule above and return the exit status."""
    if isinstance(error, LightevalNanotronError):
        print_error(str(error))
        return USAGE_ERROR
    if wants_traceback():
        traceback.print_exception(error, file=sys.stderr)
    hint = "" if wants_traceback() else f" (set {TRACEBACK_ENV}=1 for the traceback)"
    rank = f"world rank {_world_rank()}: " if "RANK" in os.environ else ""
    print(f"error: {rank}{one_line(describe(error))}{hint}", file=sys.stderr, flush=True)
    return INTERNAL_ERROR


class OneLineErrorParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors (`--max-samples 2.5`, an unknown flag, a missing
    argument) end as every failure does: one `error:` line with the fix, printed once, exit status 2.
    argparse's own printed the whole usage block (30 lines for `eval`) before its error, on every
    rank. Its sub-command parsers are of this class too (argparse makes them of the parent's)."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{self.prog}: {message} (`{self.prog} --help` lists the arguments).")
        sys.exit(USAGE_ERROR)
