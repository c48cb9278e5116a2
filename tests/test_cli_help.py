"""Each command's `--help` shows its usage examples as written: one command a line, continuation
lines kept (argparse would otherwise reflow them into one paragraph)."""

import contextlib
import io

import pytest

from lighteval_nanotron.cli import main as cli
from lighteval_nanotron.training import run_train


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


def _flat_help(argv) -> str:
    return " ".join(_help(cli.main, argv).split())


def test_every_flag_says_its_default_and_choices():
    """An option without a default value said nothing of what leaving it out does (`--dtype`: the
    checkpoint's; `--max-samples`: every doc), nor what `--dtype` accepts; `--tasks` said `(default: )`."""
    shown = _flat_help(["eval", "--help"])
    assert (
        "Model dtype (one of: float32, bfloat16, float16; default: the checkpoint's `model.dtype`, else float32)"
        in shown
    )
    assert "(a fixed subset, the same at every run) (default: all docs)" in shown
    assert "(default: )" not in shown and "`disabled` (default: `$WANDB_MODE`, else online)" in shown
    assert "evaluations the trend is fitted on (default: 5)" in _flat_help(["report", "--help"])
    assert "(with --cpu; default: 1800)" in _flat_help(["train", "--help"])
