"""The figures only a GPU gives: the device's measured bf16 matmul peak, and the engine's docs/s and
model FLOP/s for scoring and for generation at TP1 on the check's shapes (benchmarks/bench_eval.py
on a random model of each shape with SmolLM2's tokenizer, bf16, the benchmark's mix), each kind's
FLOP/s over that peak and over the benchmark's fair per-shape peak."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))


def matmul_peak(device_name: str, size: int, repeats: int) -> dict[str, Any]:
    """The median FLOP/s of a `size`^3 bf16 matrix product on the device, inputs rotated among 3
    random sets (none cached), timed with the device synchronised, after a warm-up."""
    import torch

    device = torch.device(device_name)
    operands = [
        (
            torch.randn(size, size, device=device, dtype=torch.bfloat16),
            torch.randn(size, size, device=device, dtype=torch.bfloat16),
        )
        for _ in range(3)
    ]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for a, b in operands:
        torch.mm(a, b)
    sync()
    seconds = []
    for i in range(repeats):
        a, b = operands[i % 3]
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    return {
        "size": size,
        "dtype": "bfloat16",
        "repeats": repeats,
        "median_s": median,
        "flop_per_s": 2 * size**3 / median,
    }


def bench_fields(shape: dict[str, Any]) -> dict[str, Any]:
    """Nanotron LlamaConfig fields of a shape (the benchmark's SmolLM2 fields with the shape's sizes)."""
    from bench_eval import SMOLLM2_SHAPE

    return {**SMOLLM2_SHAPE, **shape}


def bench_command(name: str, shape: dict, scale: float, tokenizer: Path, work: Path, extra: list[str]) -> list[str]:
    """bench_eval.py on a random model of `shape` at TP1 in bf16, its JSON to `work/bench-NAME.json`."""
    fields_file = work / f"bench-{name}-fields.json"
    fields_file.write_text(json.dumps(bench_fields(shape)))
    return [
        sys.executable,
        str(REPO / "benchmarks" / "bench_eval.py"),
        "--model-fields",
        str(fields_file),
        "--tokenizer",
        str(tokenizer),
        "--dtype",
        "bfloat16",
        "--layouts",
        "1x1x1",
        "--configs",
        "on",
        "--scale",
        str(scale),
        "--out",
        str(work / f"bench-{name}.json"),
        *extra,
    ]


def read_bench(work: Path, name: str) -> dict[str, Any]:
    """The benchmark's record and its per-kind rows (`bench_eval.per_task_rows`)."""
    from bench_eval import per_task_rows

    (record,) = json.loads((work / f"bench-{name}.json").read_text())["records"]
    kinds = {row["kind"]: row for row in per_task_rows(record) if row["task"].startswith("all ")}
    return {"record": record, "kinds": kinds}


def kind_figures(bench: dict[str, Any], peak: float) -> dict[str, dict[str, float]]:
    """Per task kind: docs/s, model FLOP/s, over the measured bf16 peak and the fair per-shape peak."""
    figures = {}
    for kind, row in bench.get("kinds", {}).items():
        figures[kind] = {
            "docs": row["docs"],
            "seconds": row["eval_s"],
            "docs_per_s": row["docs_per_s"],
            "flop_per_s": row["flop_per_s"],
            "of_bf16_peak": row["flop_per_s"] / peak,
            "of_fair_peak": row["peak_ratio"],
        }
    record = bench.get("record")
    if record:
        figures["mix"] = {
            "docs": record["docs"],
            "seconds": record["eval_s"],
            "docs_per_s": record["docs_per_s"],
            "flop_per_s": record["flop_per_s"],
            "of_bf16_peak": record["flop_per_s"] / peak,
            "of_fair_peak": record["peak_ratio"],
        }
    return figures
