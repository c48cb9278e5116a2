"""Every failure ends in one `error:` line, printed once: this library's errors on world rank 0 only
(every rank has them), anything else on the rank that has it with its type and place, the traceback
only when asked for; a launcher's failed rank (killed, or raising) summarized in one line."""

from __future__ import annotations

import os
import signal

import pytest
import torch.multiprocessing as mp

from lighteval_nanotron.console_errors import TRACEBACK_ENV, report_exception
from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.training.run_train import _exit_summary, _raised_summary


def _raise(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:  # noqa: BLE001 - a real exception with its traceback
        return caught


def test_library_errors_are_printed_once_by_world_rank_0(capsys, monkeypatch):
    error = _raise(CheckpointError("Checkpoint x is damaged:\n  re-copy it."))
    monkeypatch.setenv("RANK", "1")
    assert report_exception(error) == 2
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert report_exception(error) == 2
    assert capsys.readouterr().err == "error: Checkpoint x is damaged: re-copy it.\n"


def test_other_errors_name_rank_type_and_place_with_the_traceback_only_when_asked(capsys, monkeypatch):
    error = _raise(RuntimeError("gloo: connection reset"))
    monkeypatch.setenv("RANK", "3")
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    assert report_exception(error) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: world rank 3: RuntimeError: gloo: connection reset (at ") and err.count("\n") == 1
    assert f"set {TRACEBACK_ENV}=1 for the traceback" in err and "Traceback" not in err
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    assert report_exception(error) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1].startswith("error: world rank 3: Runtime")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["eval", "ckpt", "--max-samples", "2.5"], "eval: argument --max-samples: invalid int value: '2.5'"),
        (["eval", "ckpt", "--fewshot-draws", "harness"], "argument --fewshot-draws: invalid choice: 'harness'"),
        (["evaluate", "ckpt"], "argument COMMAND: invalid choice: 'evaluate'"),
        (["eval", "ckpt", "--max-smaples", "5"], "eval: unrecognized arguments: --max-smaples 5 (did you mean --max-"),
    ],
)
def test_a_command_line_of_the_wrong_form_is_one_error_line_printed_once(argv, words, capsys, monkeypatch):
    """argparse printed the whole usage block (30 lines for `eval`) then its own error, on every rank."""
    from lighteval_nanotron.cli.main import main
    from lighteval_nanotron.training.run_train import build_parser

    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert "--help` lists the options" in err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--config-file", "x.yaml", "--nproc", "two"])
    assert capsys.readouterr().err.startswith(
        "error: python -m lighteval_nanotron.training.run_train: argument --nproc"
    )
    monkeypatch.setenv("RANK", "1")  # the other ranks of a job started by hand say nothing: rank 0 says it
    with pytest.raises(SystemExit):
        main(argv)
    assert capsys.readouterr().err == ""


def _dies(rank: int, how: str) -> None:
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError("bad shapes in rank code")


@pytest.mark.distributed  # launches ranks
@pytest.mark.parametrize("how", ["kill", "raise"])
def test_a_launched_rank_that_dies_or_raises_is_summarized_in_one_line(how):
    with pytest.raises((mp.ProcessExitedException, mp.ProcessRaisedException)) as caught:
        mp.start_processes(_dies, args=(how,), nprocs=1, join=True, start_method="spawn")
    failure = caught.value
    if how == "kill":
        line = _exit_summary(failure)
        assert line.startswith("training rank 0 (pid ") and "was killed by SIGKILL" in line
    else:
        line = _raised_summary(failure)
        assert "failed: ValueError: bad shapes in rank code" in line
    assert "\n" not in line and "the other ranks were stopped" in line


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["eval", "ckpt", "--dtype", "bogus"],
            "error: lighteval-nanotron eval: argument --dtype: invalid choice: 'bogus'",
        ),
        (["eval", "ckpt", "--save-details"], "error: lighteval-nanotron eval: unrecognized arguments: --save-details"),
        (["train", "--config-file"], "error: lighteval-nanotron train: argument --config-file: expected one argument"),
    ],
)
def test_a_command_line_mistake_is_one_error_line_naming_the_commands_help(argv, expected, capsys, monkeypatch):
    """argparse printed the command's whole usage (41 lines for `eval`) before its error."""
    from lighteval_nanotron.cli.main import main

    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    printed = capsys.readouterr()
    (line,) = printed.err.splitlines()
    assert line.startswith(expected) and line.endswith(f"(`lighteval-nanotron {argv[0]} --help` lists the options)")
    assert printed.out == ""
