"""Nanotron's console in a quiet process (`nanotron_compat.console`): quieting its loggers before
its modules are imported must not make them print each record twice."""

import subprocess
import sys

CHECK = """
import logging
from lighteval_nanotron.cpu import enable_cpu_support
from lighteval_nanotron.nanotron_compat.console import NANOTRON_LOGGERS
from lighteval_nanotron.nanotron_compat.imports import import_nanotron, import_nanotron_trainer
enable_cpu_support(trainer=False)
import_nanotron()  # quiets Nanotron before its trainer is imported
assert "nanotron.trainer" not in logging.root.manager.loggerDict
import_nanotron_trainer()  # and again after
for name in NANOTRON_LOGGERS:
    logger = logging.getLogger(name)
    assert logger.propagate is False, name  # Nanotron's own get_logger created it
    assert logger.filters, name
nanotron_root = logging.getLogger("nanotron")
nanotron_root.addHandler(logging.StreamHandler())
from nanotron.logging import set_formatter
set_formatter(logging.Formatter("%(message)s"))
logging.getLogger("nanotron.trainer").warning("one line")
"""


def test_nanotron_records_are_printed_once_when_quieted_before_import():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("one line") == 1, done.stdout + done.stderr
