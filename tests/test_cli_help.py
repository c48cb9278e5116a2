"""Each command's `--help` shows its usage examples as written: one command a line, continuation
lines kept (argparse would otherwise reflow them into one paragraph)."""

import contextlib
import io

import pytest

from lighteval_nanotron.cli import main as cli
from lighteval_nanotron.hook import run_train


def _help(parser_main, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser_main(argv)
    return out.getvalue()


def _usage_lines(doc: str) -> list[str]:
    """The indented lines of a docstring's usage block (commands, comments, continuations)."""
    block = doc.split("Usage:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


VERBS = [name.rsplit(".", 1)[1].removesuffix("_cmd") for name in cli.COMMANDS]


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_help_keeps_its_usage_lines(verb):
    import importlib

    module = importlib.import_module(f"lighteval_nanotron.cli.{verb}_cmd")
    shown = [line.strip() for line in _help(cli.main, [verb, "--help"]).splitlines()]
    for line in _usage_lines(module.__doc__):
        assert line in shown, f"`{verb} --help` does not show {line!r} on a line of its own"


def test_run_train_help_keeps_its_usage_lines():
    shown = [line.strip() for line in _help(run_train.main, ["--help"]).splitlines()]
    lines = _usage_lines(run_train.__doc__)
    assert any(line.endswith("\\") for line in lines)  # a continuation line is shown as such
    for line in lines:
        assert line in shown, f"run_train --help does not show {line!r} on a line of its own"
