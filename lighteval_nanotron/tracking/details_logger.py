"""Per-sample details as Parquet: one file per task, one row per (doc, sampling method).

Columns carry lighteval 0.10's names where they mean the same (`example`, `full_prompt`,
`choices`, `gold`, `gold_index`, `predictions`, `input_tokens`, `cont_tokens`, `truncated`,
`padded`, `metrics`), plus this project's own (`task_name`, `doc_id`, `sampling_method`,
`logprobs`, `argmax_logits_eq_gold`, `unconditioned_logprobs`). Each row is one model response:
`truncated` and `padded` are lighteval's one-entry-per-response lists.
"""

from __future__ import annotations

import json
import logging
import numbers
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lighteval_nanotron.pipeline.result import EvaluationResult, SampleDetail
from lighteval_nanotron.tracking.atomic import atomic_write
from lighteval_nanotron.tracking.logger import EvaluationLogger
from lighteval_nanotron.tracking.output_lock import output_lock
from lighteval_nanotron.tracking.paths import details_path

logger = logging.getLogger(__name__)

# (column, type, the SampleDetail field it holds)
_FIXED_COLUMNS = [
    ("task_name", pa.string(), "task_name"),
    ("doc_id", pa.string(), "doc_id"),
    ("sampling_method", pa.string(), "sampling_method"),
    ("example", pa.string(), "query"),
    ("full_prompt", pa.string(), "full_prompt"),
    ("choices", pa.list_(pa.string()), "choices"),
    ("gold_index", pa.list_(pa.int64()), "gold_index"),
    ("gold", pa.list_(pa.string()), "gold"),
    ("predictions", pa.list_(pa.string()), "predictions"),
    ("logprobs", pa.list_(pa.float64()), "logprobs"),
    ("argmax_logits_eq_gold", pa.list_(pa.bool_()), "argmax_logits_eq_gold"),
    ("unconditioned_logprobs", pa.list_(pa.float64()), "unconditioned_logprobs"),
    ("input_tokens", pa.list_(pa.int64()), "input_tokens"),
    ("cont_tokens", pa.list_(pa.list_(pa.int64())), "output_tokens"),
    ("truncated", pa.list_(pa.int64()), "truncated_tokens_count"),
    ("padded", pa.list_(pa.int64()), "padded_tokens_count"),
]
_PER_RESPONSE = {"truncated", "padded"}


def _is_scalar_number(value: Any) -> bool:
    return value is None or isinstance(value, numbers.Real)


def _metrics_column(rows: list[dict[str, Any]]) -> pa.Array:
    """A struct with one field per metric: float64 for numbers, JSON text for anything else
    (corpus-level metrics keep per-sample items such as `(prediction, gold)` pairs)."""
    names = sorted({name for row in rows for name in row})
    if not names:
        return pa.array(["{}"] * len(rows), pa.string())
    arrays = []
    for name in names:
        values = [row.get(name) for row in rows]
        if all(_is_scalar_number(v) for v in values):
            arrays.append(pa.array([None if v is None else float(v) for v in values], pa.float64()))
        else:
            arrays.append(pa.array([json.dumps(v, default=str) for v in values], pa.string()))
    return pa.StructArray.from_arrays(arrays, names=names)


def details_table(details: list[SampleDetail]) -> pa.Table:
    """The Parquet table of one task's details (fixed columns plus a `metrics` struct)."""
    records = [detail.to_dict() for detail in details]
    columns = {
        column: pa.array([[r[key]] if column in _PER_RESPONSE else r[key] for r in records], kind)
        for column, kind, key in _FIXED_COLUMNS
    }
    columns["metrics"] = _metrics_column([record["metrics"] for record in records])
    return pa.table(columns)


class DetailsParquetLogger(EvaluationLogger):
    """Writes `<output_dir>/details/<model_name>/<step>/<date_id>/details_<task>_<date_id>.parquet`."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.written: list[Path] = []

    def log(self, result: EvaluationResult) -> None:
        tables = {task: details_table(details) for task, details in result.details.items()}
        self.written = []
        with output_lock(self.output_dir):  # the step's date id, shared with the results file, decided once
            for task, table in tables.items():
                path = details_path(self.output_dir, result, task)
                atomic_write(path, lambda tmp, table=table: pq.write_table(table, tmp))
                self.written.append(path)
        logger.info("Saved per-sample details of %d task(s) under %s", len(tables), self.output_dir)
