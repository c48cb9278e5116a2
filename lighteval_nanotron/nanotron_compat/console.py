"""What reaches the console: what a user needs by default, everything with `--verbose`.

Quiet by default (`quiet_nanotron`, `quiet_process`), one switch for the rest (`--verbose`, declared
by `add_verbose_flag` for every command; `LIGHTEVAL_NANOTRON_VERBOSE=1` for a launcher of one's own,
inherited by spawned ranks and torchrun workers):

- Nanotron's INFO records that restate the config or are meaningless here: the config and model
  config dumps, parameter counts and build steps, and CUDA memory lines where no CUDA device is
  used (`Memory usage: 0.00MiB`); and the path of each results file written (the training log's
  line per evaluation stays). Training iterations, checkpoints and warnings stay.
- Nanotron's tqdm bars (saving and loading weights) are drawn on a terminal only, never into a log.
- Python warnings (deprecations and notes of torch and the libraries under Nanotron) and the
  `datasets` progress bars, in the processes of this project's commands.
- nltk's failed downloads when lighteval's modules are imported offline (`tasks.lighteval_adapter`).

Each log record reaches the console once (`print_each_record_once`): libraries that print their
records with a console handler of their own (`datasets`, `huggingface_hub`) also let them propagate
to the root logger's console handler (the commands', or Nanotron's in training).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from functools import partial

from lighteval_nanotron.console_errors import VERBOSE_ENV, is_verbose, set_verbose  # noqa: F401  (the switch's users import it here)

NANOTRON_LOGGERS = ("nanotron.trainer", "nanotron.models.base", "nanotron.helpers", "nanotron.serialize.main")
"""The Nanotron loggers whose restating INFO records are left out (a logger's filter sees the records
logged on it); `quiet_loggers` adds others (the hook: the results writers', whose paths the training
log's line per evaluation makes redundant)."""
RESTATING = (
    "Config:",
    "Model Config:",
    "Local number of parameters:",
    "Total number of parameters:",
    "No checkpoint path provided.",
    "Building model..",
    "Setting PP block ranks..",
    "Setting max_position_embeddings to",
    "Saved evaluation results to",
    "Saved per-sample details",
)
"""Starts of those records: dumps of the YAML the user wrote, build steps, per-evaluation file paths."""
MEMORY = "Memory usage:"
TQDM_MODULES = ("nanotron.serialize.weights", "nanotron.serialize.optimizer", "nanotron.optim.zero")


def add_verbose_flag(parser: argparse.ArgumentParser, top_level: bool = True) -> None:
    """`-v/--verbose` on `parser`. A command's own parser takes it too (`eval ... --verbose`),
    without overriding a `--verbose` given before the command (`top_level=False`)."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if top_level else argparse.SUPPRESS,
        help="show everything: INFO logs, Nanotron's config dumps and memory lines, the stand-in notices, "
        "Python warnings, full results tables in the training log, tracebacks of unexpected errors",
    )


class _QuietNanotron(logging.Filter):
    """Leaves out the restating INFO records (and CUDA memory lines when CUDA is not in use)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or is_verbose():
            return True
        message = str(record.msg).lstrip()
        if message.startswith(RESTATING):
            return False
        return not (MEMORY in message and not _cuda_in_use())


def _cuda_in_use() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _tqdm_on_a_terminal(tqdm_class, *args, disable: bool | None = False, **kwargs):
    """Nanotron's `tqdm(..., disable=<not world rank 0>)`, drawn only when stderr is a terminal."""
    return tqdm_class(*args, disable=True if disable else None, **kwargs)


def quiet_loggers(*names: str) -> None:
    """Leave out the restating INFO records of these loggers unless verbose (idempotent). A logger
    not created yet is left alone: Nanotron's `get_logger` turns propagation off only on a logger it
    creates, so creating one here would print each of its records twice; the next call, after its
    module is imported, quiets it."""
    for name in names:
        quieted = logging.root.manager.loggerDict.get(name)
        if not isinstance(quieted, logging.Logger):
            continue
        if not any(isinstance(f, _QuietNanotron) for f in quieted.filters):
            quieted.addFilter(_QuietNanotron())


def quiet_nanotron() -> None:
    """Quiet Nanotron's console output in this process (idempotent; after Nanotron's modules are
    imported, for the bars)."""
    quiet_loggers(*NANOTRON_LOGGERS)
    for name in TQDM_MODULES:
        module = sys.modules.get(name)
        bar = getattr(module, "tqdm", None)
        if bar is not None and not isinstance(bar, partial):
            module.tqdm = partial(_tqdm_on_a_terminal, bar)


class _NotPrintedYet(logging.Filter):
    """On a console handler of the root logger: leaves out a record that a console handler of a
    logger on its way up (a library's own) has already printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        logger = logging.root.manager.loggerDict.get(record.name)
        while isinstance(logger, logging.Logger) and logger is not logging.root:
            if any(_prints(handler, record) for handler in logger.handlers):
                return False
            logger = logger.parent
        return True


def _prints(handler: logging.Handler, record: logging.LogRecord) -> bool:
    """Whether `handler` writes `record` to the console."""
    return _on_console(handler) and record.levelno >= handler.level


def _on_console(handler: logging.Handler) -> bool:
    """Whether `handler` writes to stderr or stdout."""
    consoles = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    return isinstance(handler, logging.StreamHandler) and handler.stream in consoles


def print_each_record_once() -> None:
    """Each record printed once on the console (idempotent): `_NotPrintedYet` on every console
    handler of the root logger. Called once the process's root handlers are installed: the
    commands' (`log_to_the_console`), Nanotron's in training (`hook.trainer`)."""
    for handler in logging.root.handlers:
        if _on_console(handler) and not any(isinstance(f, _NotPrintedYet) for f in handler.filters):
            handler.addFilter(_NotPrintedYet())


def log_to_the_console(verbose: bool) -> None:
    """The console handler of a command's process (stderr; INFO and up when verbose, else WARNING),
    each record printed once."""
    form = "%(levelname)s %(name)s: %(message)s" if verbose else "%(levelname)s: %(message)s"
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format=form)
    print_each_record_once()


def quiet_process() -> None:
    """The console policy of a command's process and the processes it starts: Python warnings and
    `datasets` progress bars off unless verbose (set in the environment, so spawned ranks and
    torchrun workers inherit it)."""
    if is_verbose():
        return
    warnings.simplefilter("ignore")
    inherited = os.environ.get("PYTHONWARNINGS", "")
    if not inherited.startswith("ignore"):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, ["ignore", inherited]))
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
