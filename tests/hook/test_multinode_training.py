"""Training with the hook on two torchrun "nodes" (c10d rendezvous on loopback, TP2 inside each
node, DP2 across them), each node in its own working directory with a node-local evaluation
folder: the results equal the one-node run's and are written once, on the reporting rank's node."""

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers.distributed import run_distributed
from tests.helpers.multinode import run_torchrun_nodes
from tests.hook.training_runs import MODEL_NAME, TASKS, assert_finite_results, train_worker, write_config

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def _node_local(config: Path, name: str) -> Path:
    """`config` with its evaluation output folder relative to the working directory (node-local)."""
    content = yaml.safe_load(config.read_text())
    content["lighteval_nanotron"]["output_dir"] = "eval"
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(content))
    return path


def _results(folder: Path) -> dict[int, dict]:
    return {
        int(path.stem.split("_")[1]): json.loads(path.read_text())
        for path in (folder / "results" / MODEL_NAME).glob("results_*.json")
    }


def test_two_nodes_tp2_dp2_training_with_evaluation_equals_one_node(tmp_path):
    section = {"tasks": TASKS[0], "eval_interval": 2}
    for folder in ("one", "shared"):
        (tmp_path / folder).mkdir()
    one_node = write_config(tmp_path / "one", tp=2, dp=2, train_steps=2, section=section)
    run_distributed(train_worker, 4, str(one_node), timeout=300)
    expected = _results(tmp_path / "one" / "eval")
    assert sorted(expected) == [2]

    config = _node_local(write_config(tmp_path / "shared", tp=2, dp=2, train_steps=2, section=section), "nodes.yaml")
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    argv = ["-m", "lighteval_nanotron.hook.run_train", "--config-file", str(config), "--cpu"]
    run_torchrun_nodes(nodes, 2, argv, timeout=300)

    per_node = [_results(node / "eval") for node in nodes]
    assert sorted(len(found) for found in per_node) == [0, 1]  # written once, by the reporting rank's node
    found = next(found for found in per_node if found)
    assert sorted(found) == [2]
    assert_finite_results(found[2], TASKS[:1])
    assert found[2]["results"] == expected[2]["results"]
    assert found[2]["config_general"]["consumed_tokens"] == expected[2]["config_general"]["consumed_tokens"]
