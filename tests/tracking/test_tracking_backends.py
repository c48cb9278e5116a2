import pytest
from helpers_tracking import TASK_A, TASK_B, make_result
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from lighteval_nanotron.errors import ConfigError, TrackingError
from lighteval_nanotron.tracking import (
    DetailsParquetLogger,
    EvaluationLogger,
    LoggerContainer,
    ResultsJsonLogger,
    TensorBoardLogger,
    TrackingConfig,
    format_results_table,
    step_details_dir,
    step_results_file,
)


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }


def test_tensorboard_scalars_are_at_the_training_step(tmp_path):
    logger = TensorBoardLogger(log_dir=tmp_path / "tb")
    logger.log(make_result(step=10, acc=0.25))
    logger.log(make_result(step=20, acc=0.75))
    logger.close()

    scalars = _scalars(tmp_path / "tb")
    assert scalars[f"eval/{TASK_A}/acc"] == [(10, 0.25), (20, 0.75)]
    assert scalars[f"eval/{TASK_B}/ppl"] == [(10, 12.5), (20, 12.5)]
    assert scalars["eval/all/acc"] == [(10, 0.25), (20, 0.75)]
    assert scalars["eval/wall_time_s"] == [(10, 1.25), (20, 1.25)]
    assert not any(tag.endswith("_stderr") for tag in scalars)


def test_tensorboard_logger_shares_a_training_writer_without_closing_it(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path / "train"))
    writer.add_scalar("lm_loss", 3.0, global_step=10)
    logger = TensorBoardLogger(writer=writer)
    logger.log(make_result(step=10))
    logger.close()
    writer.add_scalar("lm_loss", 2.0, global_step=20)  # still open
    writer.close()

    scalars = _scalars(tmp_path / "train")
    assert scalars["lm_loss"] == [(10, 3.0), (20, 2.0)]
    assert scalars[f"eval/{TASK_A}/acc"] == [(10, 0.5)]


@pytest.mark.distributed  # wandb.init starts its service process
def test_wandb_offline_run_receives_the_scalars(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is optional (pip install wandb) and not installed here")
    from lighteval_nanotron.options import TrackingOptions
    from lighteval_nanotron.tracking.wandb_logger import WandbLogger

    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = WandbLogger(
        TrackingOptions(wandb_project="toy", wandb_run_name="toy-run", wandb_mode="offline", wandb_dir=str(tmp_path))
    )
    logger.log(make_result(step=5, acc=0.75))
    assert logger.run.summary[f"eval/{TASK_A}/acc"] == 0.75
    assert logger.run.summary["eval/all/ppl"] == 12.5
    logger.close()
    assert list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))


class _Broken(EvaluationLogger):
    def log(self, result):
        raise ConnectionError("no route to host")


def test_container_runs_every_logger_and_reports_the_failures(tmp_path):
    container = LoggerContainer([_Broken(), ResultsJsonLogger(tmp_path), DetailsParquetLogger(tmp_path)])
    with pytest.raises(TrackingError, match="_Broken: ConnectionError"):
        container.log(make_result(step=7))
    assert step_results_file(tmp_path, "toy-run", 7) is not None
    assert step_details_dir(tmp_path, "toy-run", 7) is not None


def test_tracking_config_builds_the_requested_loggers(tmp_path):
    config = TrackingConfig(output_dir=str(tmp_path), loggers=["json", "details", "tensorboard", "log"])
    container = config.build()
    assert [type(logger).__name__ for logger in container.loggers] == [
        "ResultsJsonLogger",
        "DetailsParquetLogger",
        "TensorBoardLogger",
    ]
    container.log(make_result(step=3))
    container.close()
    assert step_results_file(tmp_path, "toy-run", 3) is not None
    assert _scalars(tmp_path / "tensorboard")[f"eval/{TASK_A}/acc"] == [(3, 0.5)]


@pytest.mark.parametrize(
    "kwargs, message",
    [({"loggers": ["json", "mlflow"]}, "mlflow"), ({"wandb_mode": "sometimes"}, "sometimes")],
)
def test_tracking_config_rejects_bad_settings(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrackingConfig(output_dir=str(tmp_path), **kwargs)


def test_results_table_lists_values_and_errors():
    lines = format_results_table(make_result(step=42)).splitlines()
    assert lines[0] == "Evaluation of toy-run at step 42 (1.2s)"
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]
    assert rows[0] == ["Task", "Metric", "Value", "Stderr"]
    assert [TASK_A, "acc", "0.5000", "± 0.1000"] in rows
    assert [TASK_B, "ppl", "12.5000", "± 1.5000"] in rows
    assert ["all", "acc", "0.5000", "± 0.1000"] in rows
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns
    assert format_results_table(make_result(step=None)).splitlines()[0] == "Evaluation of toy-run (1.2s)"


def test_cost_table_says_what_its_token_columns_count():
    from lighteval_nanotron.tracking.log_table import format_cost_table

    cost = {"seconds": 0.5, "docs": 4, "docs_per_s": 8.0, "processed_tokens": 118, "useful_tokens": 435}
    lines = format_cost_table({TASK_A: cost}).splitlines()
    assert [cell.strip() for cell in lines[0].strip("|").split("|")][-2:] == ["Computed tokens", "Useful tokens"]
    assert [cell.strip() for cell in lines[2].strip("|").split("|")][-2:] == ["118", "435"]
    assert lines[-1].startswith("Computed: token positions the model ran") and "Useful: per doc" in lines[-1]
