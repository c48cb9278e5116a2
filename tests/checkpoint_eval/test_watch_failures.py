"""`eval --watch` in one process against what a real training folder can hold: a checkpoints folder
that the training has not created yet, and a checkpoint whose metadata cannot be read."""

import shutil
import threading
from pathlib import Path

import yaml

from tests.helpers.distributed import run_distributed


def _place(source: Path, run: Path, step: int, train_steps: int, metadata: str | None = None) -> None:
    """`source` as `run/<step>/` of a training saving every 10 steps up to `train_steps`, renamed into
    place whole (as if it had settled); `metadata` replaces its checkpoint_metadata.json."""
    staging = run.parent / f"staging-{step}"
    shutil.copytree(source, staging)
    config = yaml.safe_load((staging / "config.yaml").read_text())
    config["tokens"] = {**(config.get("tokens") or {}), "train_steps": train_steps}
    config["checkpoints"] = {**(config.get("checkpoints") or {}), "checkpoint_interval": 10}
    (staging / "config.yaml").write_text(yaml.safe_dump(config))
    if metadata is not None:
        (staging / "checkpoint_metadata.json").write_text(metadata)
    run.mkdir(exist_ok=True)
    staging.rename(run / str(step))


def _watch_a_training_that_starts_later(checkpoint: Path, root: Path) -> tuple:
    """run_distributed worker: the watch starts before the training created its checkpoints folder;
    then step 10 arrives with damaged metadata, 15 holding step 10's, and step 20, the last, intact."""
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.checkpoint_eval.watch import watch_checkpoints

    run, lines = root / "checkpoints", []

    def training() -> None:
        _place(checkpoint, run, 10, train_steps=20, metadata="{not json")
        _place(checkpoint, run, 15, train_steps=20, metadata='{"metas": {"last_train_step": 10}}')
        _place(checkpoint, run, 20, train_steps=20)

    config = CheckpointEvalConfig(
        checkpoints_dir=str(run), watch=True, cpu=True, tasks="lighteval|arc:easy|0", max_samples=2,
        data_dirs="bundled", output_dir=str(root / "out"), model_name="tiny", poll_interval_s=0.2, settle_s=0,
        progress_bar=False, failure_timeout_s=60,
    )  # fmt: skip
    timer = threading.Timer(1.0, training)
    timer.start()
    try:
        watch_checkpoints(config, notify=lines.append)
    except Exception as error:  # noqa: BLE001 - the outcome is what is checked
        return lines, type(error).__name__, str(error)
    finally:
        timer.join()
    return lines, "ok", ""


def test_watch_waits_for_the_folder_and_skips_an_unreadable_checkpoint(tiny_converted, tmp_path):
    """Nanotron creates `checkpoints_path` at its first save: a watch started with the training stopped
    at once ('does not exist'). A settled checkpoint whose metadata cannot be read, or names another
    step, stopped the whole watch (the scan raised), so no later checkpoint was evaluated; each is
    recorded and skipped."""
    _, checkpoint = tiny_converted
    [(lines, error_type, message)] = run_distributed(_watch_a_training_that_starts_later, 1, checkpoint, tmp_path)
    log = "\n".join(lines)
    assert f"watch: waiting for checkpoints in {tmp_path / 'checkpoints'} (not created yet" in log
    assert "watch: step 10 FAILED, going on: Cannot read" in log
    assert "watch: step 15 FAILED, going on: Checkpoint folder" in log and "says step 10" in log
    assert "watch: evaluating step 20" in log and "evaluating step 10" not in log and "evaluating step 15" not in log
    assert "watch: stopped: the training's last checkpoint (step 20) is handled" in log
    assert error_type == "EvaluationError" and "2 checkpoint(s) could not be evaluated (step 10: Cannot read" in message
    assert sorted(path.name for path in (tmp_path / "out" / "results" / "tiny").iterdir()) == ["20"]
