"""Failures: agreed by every rank without hanging; training goes on (or stops when asked); bad
configs stop before the first step on every rank; a restarted run skips evaluated steps."""

from pathlib import Path

from tests.helpers.distributed import run_distributed
from tests.hook import failing_tasks
from tests.hook.training_runs import (
    TASKS,
    results_files,
    train_expecting_error_worker,
    train_logging_worker,
    train_worker,
    write_config,
)

CUSTOM_TASKS = str(Path(failing_tasks.__file__))


def _custom_section(tmp_path: Path, tasks: str, **extra) -> dict:
    return {
        "tasks": tasks,
        "custom_tasks": CUSTOM_TASKS,
        "data_dirs": [str(failing_tasks.write_data(tmp_path / "data"))],
        **extra,
    }


def test_failing_task_costs_only_itself_is_agreed_logged_and_training_finishes(tmp_path):
    section = _custom_section(tmp_path, "custom|toy_ok|0,custom|toy_bad_metric|0")
    config = write_config(tmp_path, dp=2, train_steps=4, section=section)
    reports = run_distributed(train_logging_worker, 2, str(config), timeout=240)
    for report in reports:
        assert report["evaluated"] == []
        assert [step for step, _ in report["failures"]] == [2, 4]
        for _, description in report["failures"]:
            assert "toy_bad_metric" in description and "injected metric failure" in description
    # The metric runs on the reporting rank (world rank 0) only; the other rank learnt it too.
    assert "world rank 0" in reports[1]["failures"][0][1]
    assert any("FAILED" in message and "training continues" in message for message in reports[0]["errors"])
    assert all(len(report["losses"]) == 4 for report in reports)
    written = results_files(tmp_path / "eval")  # the healthy task's results are still written
    assert sorted(written) == [2, 4]
    for content in written.values():
        assert set(content["results"]) == {"custom|toy_ok|0"}  # no `all` without the failed task
        assert "injected metric failure" in content["failed_tasks"]["custom|toy_bad_metric|0"]


def test_stop_on_failure_stops_every_rank(tmp_path):
    section = _custom_section(tmp_path, "custom|toy_bad_metric|0", stop_on_failure=True)
    config = write_config(tmp_path, dp=2, train_steps=4, section=section)
    reports = run_distributed(train_expecting_error_worker, 2, [str(config)], timeout=240)
    for (report,) in reports:
        assert report["type"] == "EvaluationError"
        assert "stop_on_failure" in report["error"] and "injected metric failure" in report["error"]
        assert report["step"] == 2


def test_bad_configs_fail_before_the_first_step_on_every_rank(tmp_path):
    cases = {
        "unknown task": ({"tasks": "lighteval|no_such_task|0"}, "no_such_task"),
        "prompt fails on the rank building the docs": (
            _custom_section(tmp_path, "custom|toy_ok|0,custom|toy_bad_prompt_rank0|0"),
            "injected prompt failure on rank 0",
        ),
        "bad interval": ({"eval_interval": 0}, "eval_interval is 0"),
        "unknown logger": ({"loggers": ["json", "mlflow"]}, "unknown logger(s) ['mlflow']"),
        "chat template the tokenizer lacks": ({"use_chat_template": True}, "A chat template was asked for"),
    }
    paths = [
        str(write_config(tmp_path, dp=2, train_steps=3, section=section, name=f"bad{index}.yaml"))
        for index, (section, _) in enumerate(cases.values())
    ]
    reports = run_distributed(train_expecting_error_worker, 2, paths, timeout=240)
    for rank_reports in reports:
        for (name, (_, words)), report in zip(cases.items(), rank_reports):
            assert report["error"] is not None, name
            assert words in report["error"], (name, report["error"])
            assert report["step"] in (None, 0), name  # the trainer never took a step
    prompt_errors = [rank_reports[1]["error"] for rank_reports in reports]
    assert all("world rank 0" in error and "toy_bad_prompt_rank0" in error for error in prompt_errors)
    assert not (tmp_path / "checkpoints").exists()


def test_restarted_run_does_not_evaluate_a_step_twice(tmp_path):
    first = write_config(tmp_path, dp=2, train_steps=4, checkpoint_interval=2, name="first.yaml")
    reports = run_distributed(train_worker, 2, str(first), timeout=240)
    assert all(report["evaluated"] == [2, 4] for report in reports)
    before = {step: path.stat().st_mtime_ns for step, path in _result_paths(tmp_path).items()}

    resumed = write_config(
        tmp_path,
        dp=2,
        train_steps=6,
        section={"eval_at_start": True},
        name="resumed.yaml",
    )
    _set_resume(resumed, tmp_path / "checkpoints" / "2")
    reports = run_distributed(train_worker, 2, str(resumed), timeout=240)
    assert all(report["evaluated"] == [6] for report in reports)  # 2 (start) and 4 were on disk
    after = _result_paths(tmp_path)
    assert sorted(after) == [2, 4, 6]
    assert {step: after[step].stat().st_mtime_ns for step in (2, 4)} == before
    assert sorted(results_files(tmp_path / "eval")) == [2, 4, 6]

    # Restarted again from step 2 with PIQA, a new task and a system prompt: step 2's file keeps ARC,
    # scored without one, so its evaluation is refused before any forward (nothing written there);
    # the new step 3 is evaluated and training goes on.
    details = tmp_path / "eval" / "details" / "hook-test"
    details_before = sorted(details.rglob("*.parquet"))
    section = {"eval_at_start": True, "system_prompt": "Be brief.", "tasks": f"{TASKS[1]},lighteval|siqa|0"}
    changed = write_config(tmp_path, dp=2, train_steps=3, section=section, name="changed.yaml")
    _set_resume(changed, tmp_path / "checkpoints" / "2")
    reports = run_distributed(train_worker, 2, str(changed), timeout=240)
    assert all(report["evaluated"] == [3] for report in reports)
    ((step, why),) = reports[0]["failures"]
    assert step == 2 and "system_prompt None there, 'Be brief.' now" in why, why
    assert {step: path.stat().st_mtime_ns for step, path in _result_paths(tmp_path).items() if step in (2, 4)} == before
    assert sorted((details / "2").rglob("*.parquet")) == [p for p in details_before if p.is_relative_to(details / "2")]
    assert any("siqa" in p.name for p in (details / "3").rglob("*.parquet"))


def test_another_run_under_the_same_model_name_is_not_taken_for_this_one(tmp_path):
    """A fresh run once skipped the steps that an earlier run under its model name had evaluated
    in its output folder: the earlier run's numbers stood as its own. A step already evaluated is
    now skipped only when its results were measured on this run's weights (a resume replays them:
    `test_restarted_run_does_not_evaluate_a_step_twice`); otherwise that step fails, saying so, and
    its file is kept."""
    first = write_config(tmp_path, train_steps=2, name="first.yaml")
    (report,) = run_distributed(train_worker, 1, str(first), timeout=240)
    assert report["evaluated"] == [2] and report["failures"] == []
    before = {step: path.read_bytes() for step, path in _result_paths(tmp_path).items()}
    other = write_config(tmp_path, train_steps=2, name="other.yaml")
    _edit(other, lambda content: content["general"].update(seed=7))
    (report,) = run_distributed(train_worker, 1, str(other), timeout=240)
    assert report["evaluated"] == []
    ((step, why),) = report["failures"]
    assert step == 2 and "not measured on this run's model (weights_fingerprint '" in why, why
    assert "another model_name or output_dir" in why
    assert {step: path.read_bytes() for step, path in _result_paths(tmp_path).items()} == before


def _result_paths(tmp_path: Path) -> dict:
    from lighteval_nanotron.tracking import results_files_by_step

    return results_files_by_step(tmp_path / "eval", "hook-test")


def _edit(config_path: Path, change) -> None:
    import yaml

    content = yaml.safe_load(config_path.read_text())
    change(content)
    config_path.write_text(yaml.safe_dump(content))


def _set_resume(config_path: Path, checkpoint: Path) -> None:
    _edit(
        config_path,
        lambda content: content["checkpoints"].update(resume_checkpoint_path=str(checkpoint), checkpoint_interval=1000),
    )


def _train_without_wandb_credentials(config_paths: list) -> list:
    """run_distributed worker: a new user's environment (no W&B key, no W&B settings file)."""
    import os
    import tempfile

    os.environ.pop("WANDB_API_KEY", None)
    os.environ["HOME"] = tempfile.mkdtemp(prefix="home_")
    return train_expecting_error_worker(config_paths)


def test_wandb_an_unwritable_output_folder_and_a_bigger_tokenizer_stop_every_rank_before_step_1(tmp_path):
    """W&B without credentials (its run opens on one rank: the others must not wait for it), an
    output folder under a file, a tokenizer with one id past the model's vocabulary."""
    import yaml

    from tests.models.test_vocabulary import _bigger_tokenizer

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for name in ("wandb", "unwritable", "tokenizer"):
        (tmp_path / name).mkdir()
    wandb = write_config(tmp_path / "wandb", dp=2, section={"loggers": ["json", "wandb"], "wandb_mode": "online"})
    unwritable = write_config(tmp_path / "unwritable", dp=2, section={"output_dir": str(blocker / "eval")})
    bigger = write_config(tmp_path / "tokenizer", dp=2)
    _bigger_tokenizer().save_pretrained(tmp_path / "bigger_tokenizer")
    content = yaml.safe_load(bigger.read_text())
    content["tokenizer"]["tokenizer_name_or_path"] = str(tmp_path / "bigger_tokenizer")
    bigger.write_text(yaml.safe_dump(content))
    configs = [str(wandb), str(unwritable), str(bigger)]
    reports = run_distributed(_train_without_wandb_credentials, 2, configs, timeout=300)
    for wandb_report, unwritable_report, tokenizer_report in reports:
        assert wandb_report["type"] == "TrackingError" and wandb_report["step"] in (None, 0), wandb_report
        assert "W&B could not open a run (UsageError: No API key configured" in wandb_report["error"]
        assert unwritable_report["type"] == "EvaluationError" and unwritable_report["step"] in (None, 0)
        assert f"The output folder {blocker / 'eval'} cannot be written" in unwritable_report["error"]
        assert tokenizer_report["type"] == "EvaluationError" and tokenizer_report["step"] in (None, 0)
        assert "has 1025 token ids (0..1024) but the model's vocabulary has 1024" in tokenizer_report["error"]
