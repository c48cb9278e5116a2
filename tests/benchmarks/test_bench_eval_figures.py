"""Pure pieces of `benchmarks/bench_eval.py`: `--tasks` parsing and the decode roofline."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_eval  # noqa: E402


def test_tasks_replace_the_mix():
    tasks = bench_eval.parse_tasks("lighteval|gsm8k|5=10, lighteval|piqa|0=3")
    assert tasks == [("lighteval|gsm8k|5", 10), ("lighteval|piqa|0", 3)]
    assert bench_eval._mix_specs(0.5, tasks) == tasks
    assert bench_eval.parse_tasks(None) is None
    with pytest.raises(SystemExit, match="suite\\|task\\|shots=docs"):
        bench_eval.parse_tasks("gsm8k=10")


def test_decode_roofline_counts_weights_per_step_and_cached_keys_values():
    cost = bench_eval.DecodeCost(weight_bytes=1000, kv_bytes_per_position=10, bandwidth=1e4)
    stats = SimpleNamespace(decode_steps=3, decode_cache_positions=50, decode_seconds=0.7)
    row = cost.roofline(stats)
    assert row["decode_weight_bytes"] == 3000 and row["decode_kv_bytes"] == 500
    assert row["decode_roofline_s"] == pytest.approx(0.35)
    assert row["decode_roofline_ratio"] == pytest.approx(0.5)
