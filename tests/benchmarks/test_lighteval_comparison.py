"""`benchmarks/bench_eval.py --lighteval on` end to end: lighteval's own pipeline on an HF copy
of the same (tiny, random) checkpoint, paired with the engine's runs, the per-doc predictions of
every task kind of the mix compared in the same run (0 differences), lighteval's figures present."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tiny_model import make_tiny_checkpoint

pytest.importorskip("lighteval")

REPO = Path(__file__).resolve().parents[2]


def test_bench_eval_compares_with_lighteval_with_no_prediction_difference(tmp_path):
    # 5-shot MMLU prompts of the byte-level test vocabulary are ~2k tokens: no truncation on either side
    checkpoint = make_tiny_checkpoint(tmp_path / "tiny", max_position_embeddings=4096)
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_eval.py"),
        "--lighteval", "on",
        "--checkpoint", str(checkpoint),
        "--cache", str(tmp_path / "cache"),
        "--scale", "0.01",
        "--layouts", "1x1x1",
        "--configs", "on",
        "--no-per-task",
        "--max-new-tokens", "4",
        "--cores", "1",
        "--out", str(out),
    ]  # fmt: skip
    finished = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]

    (record,) = json.loads(out.read_text())["records"]
    side = record["lighteval"]
    agreement = side["agreement"]
    assert agreement["differences"] == []
    assert agreement["docs_compared"] == record["docs"] == agreement["prompts_equal"]
    assert agreement["generations_compared"] == record["task_costs"]["lighteval|gsm8k|0"]["docs"] >= 1
    (mix,) = [row for row in side["rows"] if row["item"] == "the mix"]
    assert mix["lighteval_docs"] == mix["docs"] == record["docs"]
    assert mix["theirs_s"] > 0 and mix["theirs_cpu_s"] > 0 and mix["theirs_mb"] > 0
    assert mix["ratio_cpu"] == pytest.approx(mix["theirs_cpu_s"] / mix["ours_cpu_s"])
    assert (tmp_path / "cache" / "tiny-hf" / "model.safetensors").is_file()  # the converter's export
    assert "per-doc answers of the mix" in finished.stdout
