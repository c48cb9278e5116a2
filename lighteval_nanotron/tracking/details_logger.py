"""Per-sample details as Parquet: one file per task, one row per (doc, sampling method)."""

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
from lighteval_nanotron.tracking.base import EvaluationLogger
from lighteval_nanotron.tracking.paths import details_path

logger = logging.getLogger(__name__)

_FIXED_SCHEMA = pa.schema(
    [
        ("task_name", pa.string()),
        ("doc_id", pa.string()),
        ("sampling_method", pa.string()),
        ("query", pa.string()),
        ("full_prompt", pa.string()),
        ("choices", pa.list_(pa.string())),
        ("gold_index", pa.list_(pa.int64())),
        ("gold", pa.list_(pa.string())),
        ("predictions", pa.list_(pa.string())),
        ("logprobs", pa.list_(pa.float64())),
        ("argmax_logits_eq_gold", pa.list_(pa.bool_())),
        ("unconditioned_logprobs", pa.list_(pa.float64())),
        ("input_tokens", pa.list_(pa.int64())),
        ("output_tokens", pa.list_(pa.list_(pa.int64()))),
        ("truncated_tokens_count", pa.int64()),
        ("padded_tokens_count", pa.int64()),
    ]
)


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
    columns = {field.name: pa.array([record[field.name] for record in records], field.type) for field in _FIXED_SCHEMA}
    columns["metrics"] = _metrics_column([record["metrics"] for record in records])
    return pa.table(columns)


class DetailsParquetLogger(EvaluationLogger):
    """Writes `<output_dir>/details/<model_name>/<step or timestamp>/details_<task>.parquet`."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.written: list[Path] = []

    def log(self, result: EvaluationResult) -> None:
        tables = {task: details_table(details) for task, details in result.details.items()}
        self.written = []
        for task, table in tables.items():
            path = details_path(self.output_dir, result, task)
            atomic_write(path, lambda tmp, table=table: pq.write_table(table, tmp))
            self.written.append(path)
        logger.info("Saved per-sample details of %d task(s) under %s", len(tables), self.output_dir)
