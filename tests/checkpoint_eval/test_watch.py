"""`eval --checkpoints-dir DIR --watch` following a folder that a training (here: the test) fills:
checkpoints copied in slowly, half-written first, are each evaluated once, on the complete
weights; a restart resumes; SIGTERM and a stop file end it cleanly."""

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import yaml

from lighteval_nanotron.parallel.distributed import free_loopback_port
from lighteval_nanotron.tracking import results_files_by_step
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.helpers.processes import Followed

REPO = Path(__file__).resolve().parents[2]
TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"
TOLERANCE = 1e-4
SETTLE_S = 3.0


def _env() -> dict:
    return {
        **os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
    }  # fmt: skip


def _watch_command(run: Path, out: Path, *extra: str, nproc: int = 1) -> list[str]:
    launcher = [sys.executable]
    if nproc > 1:
        launcher += [
            "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
            "--master-port", str(free_loopback_port()),
        ]  # fmt: skip
    return [
        *launcher, "-m", "lighteval_nanotron", "eval", "--checkpoints-dir", str(run), "--watch", "--cpu",
        "--tasks", TASKS, "--max-samples", "4", "--data-dir", "bundled", "--output-dir", str(out),
        "--model-name", "tiny", "--poll-interval-s", "0.5", "--settle-s", str(SETTLE_S), "--no-progress", *extra,
    ]  # fmt: skip


def _training_config(source: Path, target: Path, train_steps: int) -> None:
    """The checkpoint's config.yaml as a training saving every 10 steps up to `train_steps` writes it."""
    config = yaml.safe_load((source / "config.yaml").read_text())
    config["tokens"] = {**(config.get("tokens") or {}), "train_steps": train_steps}
    config["checkpoints"] = {**(config.get("checkpoints") or {}), "checkpoint_interval": 10}
    (target / "config.yaml").write_text(yaml.safe_dump(config))


def _copy_slowly(source: Path, target: Path, train_steps: int) -> None:
    """The metadata first (complete by the rule from then on), then half the weights, a pause, one
    weight file written in two halves with a pause, the rest: every pause is shorter than the settle time."""
    target.mkdir()
    shutil.copy(source / "checkpoint_metadata.json", target)
    for name in ("model_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, target)
    _training_config(source, target, train_steps)
    files = sorted((source / "model").rglob("*.safetensors"))
    middle = len(files) // 2

    def copy(file: Path) -> Path:
        destination = target / file.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, destination)
        return destination

    for file in files[:middle]:
        copy(file)
    time.sleep(SETTLE_S / 3)
    data = files[middle].read_bytes()
    half_written = target / files[middle].relative_to(source)
    half_written.parent.mkdir(parents=True, exist_ok=True)
    half_written.write_bytes(data[: len(data) // 2])
    time.sleep(SETTLE_S / 3)
    half_written.write_bytes(data)
    for file in files[middle + 1 :]:
        copy(file)


def _copy(source: Path, target: Path, train_steps: int) -> None:
    shutil.copytree(source, target)
    _training_config(source, target, train_steps)


def test_watch_evaluates_slowly_copied_checkpoints_once_and_ends_at_the_last(
    tiny_converted, tiny_converted_other, tmp_path
):
    (model_a, checkpoint_a), (model_b, checkpoint_b) = tiny_converted, tiny_converted_other
    run, out = tmp_path / "checkpoints", tmp_path / "out"
    run.mkdir()
    with Followed(_watch_command(run, out), tmp_path / "watch.log", REPO, _env()) as watcher:
        watcher.wait_for("watch: waiting for checkpoints", timeout=180)
        _copy_slowly(checkpoint_a, run / "10", train_steps=20)
        watcher.wait_for("watch: evaluating step 10", timeout=120)
        _copy_slowly(checkpoint_b, run / "20", train_steps=20)  # the training's last checkpoint
        assert watcher.finish(timeout=180) == 0, watcher.output()[-4000:]
        log = watcher.output()
    assert log.count("watch: evaluating step 10") == log.count("watch: evaluating step 20") == 1, log
    assert "FAILED" not in log and "Skipping" not in log
    assert "watch: stopped: the training's last checkpoint (step 20) is handled" in log
    assert sorted(results_files_by_step(out, "tiny")) == [10, 20]
    assert max_logprob_difference(model_a, read_details(out / "details" / "tiny" / "10")) < TOLERANCE
    assert max_logprob_difference(model_b, read_details(out / "details" / "tiny" / "20")) < TOLERANCE


def _hidden_files(folder: Path) -> list[Path]:
    """Half-written files: the atomic writer's temporaries (`.<name>.<random>.tmp`), or any other hidden
    file but the output folder's lock file."""
    from lighteval_nanotron.tracking.output_lock import LOCK_NAME

    return [path for path in folder.rglob(".*") if path.is_file() and path.name != LOCK_NAME]


def test_watch_resumes_after_a_restart_and_stops_on_sigterm_and_a_stop_file(
    tiny_converted, tiny_converted_other, tmp_path
):
    (_, checkpoint_a), (model_b, checkpoint_b) = tiny_converted, tiny_converted_other
    run, out = tmp_path / "checkpoints", tmp_path / "out"
    run.mkdir()
    _copy(checkpoint_a, run / "10", train_steps=40)  # the training goes on: the watch never ends by itself
    with Followed(_watch_command(run, out), tmp_path / "first.log", REPO, _env()) as watcher:
        watcher.wait_for("watch: evaluating step 10", timeout=180)
        watcher.signal(signal.SIGTERM)  # during the evaluation: it is finished and written, then the watch stops
        assert watcher.finish(timeout=120) == 0, watcher.output()[-4000:]
        assert "watch: stopped: SIGTERM received" in watcher.output()
    first = results_files_by_step(out, "tiny")
    assert sorted(first) == [10] and not _hidden_files(out)
    stamp = first[10].stat().st_mtime_ns

    _copy(checkpoint_b, run / "20", train_steps=40)
    stop_file = tmp_path / "STOP"
    command = _watch_command(run, out, "--stop-file", str(stop_file), "--dp", "2", nproc=2)
    with Followed(command, tmp_path / "second.log", REPO, _env()) as watcher:
        watcher.wait_for("watch: evaluating step 20", timeout=240)
        watcher.wait_for("watch: waiting for checkpoints", timeout=120)
        stop_file.touch()
        assert watcher.finish(timeout=60) == 0, watcher.output()[-4000:]
        log = watcher.output()
    assert "watch: step 10 already has results for every task: skipped" in log
    assert log.count("watch: evaluating step 20") == 1 and "evaluating step 10" not in log
    assert f"watch: stopped: stop file {stop_file} exists" in log
    written = results_files_by_step(out, "tiny")
    assert sorted(written) == [10, 20] and written[10].stat().st_mtime_ns == stamp
    # the signal across the run, as the hook computes it: the restarted watch read step 10 from disk
    signals = {step: json.loads(written[step].read_text())["signal"]["series"] for step in written}
    assert [signals[step]["lighteval|arc:easy|0"]["acc"]["evaluations"] for step in (10, 20)] == [1, 2]
    assert signals[20]["lighteval|arc:easy|0"]["acc"]["step"] == 20
    assert max_logprob_difference(model_b, read_details(out / "details" / "tiny" / "20")) < TOLERANCE
    assert not _hidden_files(out)
