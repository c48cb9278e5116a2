"""The device check's dry mode: the same driver (conversion of a GGUF, CPU reference evaluations,
"device" runs at PP2 on gloo compared doc by doc in fp32 and bf16, the hook in a bf16 TP2
REDUCE_SCATTER training compared bitwise) on a tiny model, so that scripts/gpu_check.py cannot rot."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.convert.tiny_llama import tiny_hf_llama, tiny_tokenizer, write_tiny_gguf

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.timeout(900)]


def test_dry_gpu_check_passes_and_writes_its_report(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(gguf, tiny_hf_llama(tie=True), tiny_tokenizer())
    command = [
        sys.executable, str(REPO / "scripts" / "gpu_check.py"), "--dry", "--gguf", str(gguf),
        "--out", str(tmp_path / "out"),
        "--tasks", "lighteval|arc:easy|0,lighteval|gsm8k|0", "--max-samples", "2", "--skip", "benchmark",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert report["failures"] == [] and report["training"]["bitwise_equal"]
    compared = {c["compared"] for c in report["comparisons"]}
    assert "gloo-tp1-pp2-dp1-float32 vs cpu-tp1-float32" in compared
    assert "RESULT: PASSED" in (tmp_path / "out" / "summary.txt").read_text()
