"""Where evaluation results go: results JSON, per-sample Parquet details, TensorBoard, W&B, a text
table for the log, and curves across training steps (`plot`)."""

from lighteval_nanotron.tracking.atomic import atomic_write, atomic_write_text
from lighteval_nanotron.tracking.config import TrackingConfig, open_loggers
from lighteval_nanotron.tracking.container import LoggerContainer
from lighteval_nanotron.tracking.details_logger import DetailsParquetLogger, details_table
from lighteval_nanotron.tracking.json_logger import ResultsJsonLogger, results_to_json
from lighteval_nanotron.tracking.log_table import format_cost_table, format_results_table
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.paths import (
    date_id,
    details_dir,
    details_path,
    details_task_name,
    evaluated_steps,
    evaluated_tasks_by_step,
    results_dir,
    results_files_by_step,
    results_path,
    run_date_id,
    step_details_dir,
    step_results_file,
)
from lighteval_nanotron.tracking.scalars import result_scalars
from lighteval_nanotron.tracking.tensorboard_logger import TensorBoardLogger

__all__ = [
    "DetailsParquetLogger",
    "EvaluationLogger",
    "LoggerContainer",
    "ResultsJsonLogger",
    "TensorBoardLogger",
    "TrackingConfig",
    "atomic_write",
    "atomic_write_text",
    "date_id",
    "details_dir",
    "details_path",
    "details_task_name",
    "details_table",
    "evaluated_steps",
    "evaluated_tasks_by_step",
    "open_loggers",
    "format_cost_table",
    "format_results_table",
    "result_scalars",
    "results_dir",
    "results_files_by_step",
    "results_path",
    "results_to_json",
    "run_date_id",
    "step_details_dir",
    "step_results_file",
]
