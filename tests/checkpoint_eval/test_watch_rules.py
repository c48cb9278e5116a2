"""`eval --watch`'s rules without a model: when a checkpoint is ready, what comes next, when the
training is done, and signals as stop requests."""

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.checkpoint_eval.arrivals import ArrivalScanner, Scan, fingerprint, last_saved_step
from lighteval_nanotron.checkpoint_eval.discovery import CheckpointInfo
from lighteval_nanotron.checkpoint_eval.stop_signals import stop_signals
from lighteval_nanotron.checkpoint_eval.watch import decide
from lighteval_nanotron.cli.main import main
from lighteval_nanotron.errors import CheckpointError, ConfigError
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig


def _write_checkpoint(folder: Path, metadata: bool = True, train_steps: int = 30, interval: int = 10) -> Path:
    (folder / "model" / "layer").mkdir(parents=True, exist_ok=True)
    (folder / "model" / "layer" / "model_weight.safetensors").write_bytes(b"x" * 10)
    (folder / "config.yaml").write_text(
        yaml.safe_dump({"tokens": {"train_steps": train_steps}, "checkpoints": {"checkpoint_interval": interval}})
    )
    if metadata:
        metas = {"last_train_step": int(folder.name), "consumed_train_samples": 4 * int(folder.name)}
        (folder / "checkpoint_metadata.json").write_text(json.dumps({"metas": metas}))
    return folder


def test_a_checkpoint_is_ready_once_complete_and_settled(tmp_path):
    scanner = ArrivalScanner(tmp_path, settle_s=5)
    _write_checkpoint(tmp_path / "10", metadata=False)
    scan = scanner.scan(now=0, handled=set())
    assert (scan.ready, scan.writing, scan.last_step) == ([], [10], None)  # no metadata: being written

    (tmp_path / "10" / "checkpoint_metadata.json").write_text(json.dumps({"metas": {"last_train_step": 10}}))
    assert scanner.scan(now=1, handled=set()).writing == [10]  # complete, first seen: not settled yet
    assert scanner.scan(now=4, handled=set()).writing == [10]
    weight = tmp_path / "10" / "model" / "layer" / "model_weight.safetensors"
    weight.write_bytes(b"x" * 20)  # still being written: the clock starts again
    assert scanner.scan(now=7, handled=set()).writing == [10]
    assert scanner.scan(now=11, handled=set()).writing == [10]
    scan = scanner.scan(now=12, handled=set())
    assert [(info.step, info.path) for info in scan.ready] == [(10, tmp_path / "10")]
    assert scan.last_step == 30  # from its config.yaml: train_steps 30, a multiple of the interval
    assert scanner.scan(now=13, handled={10}).ready == []  # handled: not offered again

    os.utime(weight, ns=(1, 1))  # a touched file counts as a change too
    assert fingerprint(tmp_path / "10") != ()


def test_settle_zero_takes_a_complete_checkpoint_at_once(tmp_path):
    _write_checkpoint(tmp_path / "20")
    _write_checkpoint(tmp_path / "10")
    (tmp_path / "latest.txt").write_text("20")
    (tmp_path / "notes").mkdir()
    (tmp_path / "20" / "checkpoint_metadata.json").write_text("{not json")
    scan = ArrivalScanner(tmp_path, settle_s=0).scan(now=0, handled=set())
    # metadata unread: a damaged checkpoint is the watch's to record and skip, not a failed look
    assert [(info.step, info.consumed_train_samples) for info in scan.ready] == [(10, None), (20, None)]


def test_the_checkpoints_folder_may_come_later_but_not_go(tmp_path):
    root = tmp_path / "checkpoints"
    scanner = ArrivalScanner(root, settle_s=0)
    assert scanner.scan(now=0, handled=set()) == Scan([], [], None, root_exists=False)
    waiting = decide(scanner.scan(now=1, handled=set()), set(), None, False)
    assert waiting.action == "wait" and waiting.reason.startswith("not created yet: Nanotron creates it")
    _write_checkpoint(root / "10")
    assert [info.step for info in scanner.scan(now=2, handled=set()).ready] == [10]
    shutil.rmtree(root)
    with pytest.raises(CheckpointError, match="was removed while watched"):
        scanner.scan(now=3, handled={10})
    # what can never hold step folders is refused, not watched for ever
    (tmp_path / "a_file").write_text("")
    with pytest.raises(CheckpointError, match="a_file is a file, not a folder"):
        ArrivalScanner(tmp_path / "a_file", settle_s=0).scan(now=0, handled=set())
    with pytest.raises(CheckpointError, match="one checkpoint, not .*step folders"):
        ArrivalScanner(_write_checkpoint(tmp_path / "20"), settle_s=0).scan(now=0, handled=set())


def test_last_saved_step(tmp_path):
    def last(**sections) -> int | None:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "config.yaml").write_text(yaml.safe_dump(sections))
        return last_saved_step(folder)

    assert last(tokens={"train_steps": 25}, checkpoints={"checkpoint_interval": 10}) == 20  # Nanotron 0.4
    assert last(tokens={"train_steps": 25}, checkpoints={"checkpoint_interval": 10, "save_final_state": True}) == 25
    assert last(tokens={"train_steps": 30}, checkpoints={"checkpoint_interval": 10}) == 30
    assert last(tokens={"train_steps": 5}, checkpoints={"checkpoint_interval": 10}) is None  # never saves
    assert last(general={"project": "converted"}) is None
    assert last_saved_step(tmp_path / "missing") is None


def _infos(*steps: int) -> list[CheckpointInfo]:
    return [CheckpointInfo(Path(str(step)), step) for step in steps]


def test_decide():
    waiting = Scan(ready=_infos(20, 30), writing=[40], last_step=50)
    assert decide(waiting, set(), None, False).checkpoint.step == 20  # oldest first
    newest = decide(waiting, set(), None, True)
    assert (newest.checkpoint.step, newest.passed_over) == (30, (20,))
    assert decide(waiting, set(), "SIGTERM received", False).action == "stop"  # before any more work

    nothing = Scan(ready=[], writing=[40], last_step=50)
    assert (decide(nothing, {20, 30}, None, False).action, decide(nothing, set(), None, False).writing) == (
        "wait",
        (40,),
    )
    done = decide(Scan(ready=[], writing=[60], last_step=50), {50}, None, False)  # 60: beyond the last step
    assert (done.action, done.reason) == ("stop", "the training's last checkpoint (step 50) is handled")
    assert decide(Scan(ready=[], writing=[40], last_step=50), {50}, None, False).action == "wait"  # 40 unfinished
    assert decide(Scan(ready=[], writing=[], last_step=None), {10}, None, False).action == "wait"  # end unknown


def test_signals_become_a_stop_request():
    previous = signal.getsignal(signal.SIGTERM)
    with stop_signals() as stop:
        assert stop.reason is None
        os.kill(os.getpid(), signal.SIGTERM)
        started = time.monotonic()
        stop.wait(30)  # returns at once: the signal already arrived
        assert time.monotonic() - started < 10
        assert stop.reason == "SIGTERM received"
    assert signal.getsignal(signal.SIGTERM) is previous


def test_watch_options_and_flags_are_checked(capsys):
    def config(**options) -> CheckpointEvalConfig:
        return CheckpointEvalConfig(tasks="lighteval|piqa|0", checkpoints_dir="run", **options)

    with pytest.raises(ConfigError, match="poll-interval-s"):
        config(poll_interval_s=0)
    with pytest.raises(ConfigError, match="poll-interval-s"):
        config(poll_interval_s=7200)
    with pytest.raises(ConfigError, match="settle-s"):
        config(settle_s=-1)
    with pytest.raises(ConfigError, match="not below --failure-timeout-s"):
        config(watch=True, poll_interval_s=100, failure_timeout_s=50).check_watch()
    assert main(["eval", "ckpt", "--cpu", "--tasks", "lighteval|piqa|0", "--stop-file", "STOP"]) == 2
    assert "error: --stop-file only applies with --watch" in capsys.readouterr().err
    assert main(["eval", "ckpt", "--cpu", "--tasks", "lighteval|piqa|0", "--watch"]) == 2
    assert "--watch follows a folder of checkpoints: give --checkpoints-dir" in capsys.readouterr().err
