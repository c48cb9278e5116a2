"""Training with the hook on two torchrun "nodes" (rendezvous on loopback, TP2 inside each node,
DP2 across them), each node in its own working directory with a node-local evaluation folder: the
results equal the one-node run's and are written once, on the reporting rank's node; a restart on
another node mapping (the reporting rank moved to the other node) still finds the evaluated step."""

import json
from pathlib import Path

import yaml

from tests.helpers.distributed import run_distributed
from tests.helpers.multinode import run_torchrun_nodes
from tests.hook.training_runs import MODEL_NAME, TASKS, assert_finite_results, train_worker, write_config


def _node_local(config: Path, name: str) -> Path:
    """`config` with its evaluation output folder relative to the working directory (node-local)."""
    content = yaml.safe_load(config.read_text())
    content["lighteval_nanotron"]["output_dir"] = "eval"
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(content))
    return path


def _results(folder: Path) -> dict[int, dict]:
    from lighteval_nanotron.tracking import results_files_by_step

    return {step: json.loads(path.read_text()) for step, path in results_files_by_step(folder, MODEL_NAME).items()}


def _resumed(config: Path, checkpoint: Path, train_steps: int) -> Path:
    content = yaml.safe_load(config.read_text())
    content["tokens"]["train_steps"] = train_steps
    content["checkpoints"].update(resume_checkpoint_path=str(checkpoint), checkpoint_interval=1000)
    content["lighteval_nanotron"]["eval_at_start"] = True
    path = config.with_name("resumed.yaml")
    path.write_text(yaml.safe_dump(content))
    return path


def test_two_nodes_tp2_dp2_equal_one_node_and_a_restart_on_another_mapping_skips_done_steps(tmp_path):
    for folder in ("one", "shared"):
        (tmp_path / folder).mkdir()
    section = {"tasks": TASKS[0], "eval_interval": 2}
    one_node = write_config(tmp_path / "one", tp=2, dp=2, train_steps=2, section=section)
    run_distributed(train_worker, 4, str(one_node), timeout=300)
    expected = _results(tmp_path / "one" / "eval")
    assert sorted(expected) == [2]

    # two nodes, c10d rendezvous: train to step 2 (evaluated, checkpointed to the shared folder)
    shared = write_config(tmp_path / "shared", tp=2, dp=2, train_steps=2, checkpoint_interval=2, section=section)
    config = _node_local(shared, "nodes.yaml")
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    argv = ["-m", "lighteval_nanotron.training.run_train", "--cpu", "--config-file"]
    run_torchrun_nodes(nodes, 2, [*argv, str(config)], timeout=300)
    per_node = [_results(node / "eval") for node in nodes]
    assert sorted(len(found) for found in per_node) == [0, 1]  # written once, by the reporting rank's node
    reporting_node = 0 if per_node[0] else 1
    found = per_node[reporting_node]
    assert sorted(found) == [2]
    assert_finite_results(found[2], TASKS[:1])
    assert found[2]["results"] == expected[2]["results"]
    assert found[2]["config_general"]["consumed_tokens"] == expected[2]["config_general"]["consumed_tokens"]

    # restart from step 2 to 4 with the other node first (static rendezvous: world rank 0, the
    # reporting rank, now runs in the other node's folder, which has no results)
    resumed = _resumed(config, tmp_path / "shared" / "checkpoints" / "2", train_steps=4)
    moved = [nodes[1 - reporting_node], nodes[reporting_node]]
    run_torchrun_nodes(moved, 2, [*argv, str(resumed)], timeout=300, static=True)
    assert sorted(_results(moved[0] / "eval")) == [4]  # step 2 (eval_at_start) found on the other node
    assert sorted(_results(moved[1] / "eval")) == [2]
