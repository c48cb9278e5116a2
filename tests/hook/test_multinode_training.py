"""Training with the hook on two torchrun "nodes" (rendezvous on loopback, TP2 inside each node,
DP2 across them), each node in its own working directory with a node-local evaluation folder: the
results equal the one-node run's and are written once, on the reporting rank's node; a restart on
another node mapping (the reporting rank moved to the other node) still finds the evaluated step."""

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


def _resumed(config: Path, checkpoint: Path, train_steps: int) -> Path:
    content = yaml.safe_load(config.read_text())
    content["tokens"]["train_steps"] = train_steps
    content["checkpoints"].update(resume_checkpoint_path=str(checkpoint), checkpoint_interval=1000)
    content["lighteval_nanotron"]["eval_at_start"] = True
    path = config.with_name("resumed.yaml")
    path.write_text(yaml.safe_dump(content))
    return path


def test_restart_with_the_reporting_rank_on_another_node_skips_evaluated_steps(tmp_path):
    (tmp_path / "shared").mkdir()
    section = {"tasks": TASKS[0], "eval_interval": 2}
    first = write_config(tmp_path / "shared", tp=2, dp=2, train_steps=2, checkpoint_interval=2, section=section)
    first = _node_local(first, "first.yaml")
    a, b = tmp_path / "a", tmp_path / "b"
    argv = ["-m", "lighteval_nanotron.hook.run_train", "--cpu", "--config-file"]
    run_torchrun_nodes([a, b], 2, [*argv, str(first)], timeout=300, static=True)
    assert sorted(_results(a / "eval")) == [2] and _results(b / "eval") == {}  # world rank 0 ran in `a`

    resumed = _resumed(first, tmp_path / "shared" / "checkpoints" / "2", train_steps=4)
    run_torchrun_nodes([b, a], 2, [*argv, str(resumed)], timeout=300, static=True)  # now world rank 0 is in `b`
    assert sorted(_results(b / "eval")) == [4]  # step 2 (eval_at_start) was found in `a`'s folder: not redone
    assert sorted(_results(a / "eval")) == [2]
