"""Checkpoint evaluation beyond one machine, on one machine: two torchrun "nodes" (c10d rendezvous
on loopback, TP2 inside each node, DP2 across them) and a plain `srun` launch (SLURM's variables
only), each node in its own working directory with a node-local output folder. Results equal the
single-process run's, and are written once, by the node that holds the reporting rank."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.helpers.multinode import REPO, _env, run_srun_tasks, run_torchrun_nodes

TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"
MODEL = "tiny"
TOLERANCE = 1e-4


def _eval_argv(checkpoint: Path, *layout: str) -> list[str]:
    return [
        "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks", TASKS, "--max-samples", "4",
        "--data-dir", "bundled", "--output-dir", "out", "--model-name", MODEL, "--loggers", "json", "details",
        *layout,
    ]  # fmt: skip


def _metrics(results_file: Path) -> dict:
    return json.loads(results_file.read_text())["results"]


def _assert_close(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for task in expected:
        assert got[task].keys() == expected[task].keys(), task
        for name, value in expected[task].items():
            assert got[task][name] == pytest.approx(value, abs=TOLERANCE), (task, name)


def _written_once(node_dirs: list[Path]) -> Path:
    """The one results file of the run, in the output folder of the node holding the reporting rank."""
    found = [f for d in node_dirs for f in (d / "out" / "results" / MODEL).rglob("results_*.json")]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def one_process(tiny_converted, tmp_path_factory) -> Path:
    """The single-process run's results file."""
    folder = tmp_path_factory.mktemp("one_process")
    argv = [sys.executable, "-m", *_eval_argv(tiny_converted[1])]
    done = subprocess.run(argv, cwd=folder, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return _written_once([folder])


def test_two_torchrun_nodes_tp2_dp2_equal_one_process(tiny_converted, one_process, tmp_path):
    model, checkpoint = tiny_converted
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    outputs = run_torchrun_nodes(nodes, 2, ["-m", *_eval_argv(checkpoint, "--tp", "2", "--dp", "2")], timeout=300)
    results_file = _written_once(nodes)
    assert json.loads(results_file.read_text())["config_general"]["parallelism"] == {"tp": 2, "pp": 1, "dp": 2}
    _assert_close(_metrics(results_file), _metrics(one_process))
    # acc, acc_norm, their centered values and the cost row, from one rank
    assert sum(text.count("| lighteval|arc:easy|0") for text in outputs) == 5
    out = next(folder for folder in results_file.parents if folder.name == "out")
    assert max_logprob_difference(model, read_details(out / "details" / MODEL)) < TOLERANCE


def test_srun_without_torchrun_two_nodes_equal_one_process(tiny_converted, one_process, tmp_path):
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    run_srun_tasks(nodes, 1, _eval_argv(tiny_converted[1], "--dp", "2"), timeout=300)
    results_file = _written_once(nodes)
    assert results_file.is_relative_to(nodes[0])  # SLURM_PROCID 0 is world rank 0: the reporting rank
    _assert_close(_metrics(results_file), _metrics(one_process))
