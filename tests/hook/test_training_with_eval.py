"""DistributedTrainer on CPU with the hook: results at exactly the configured steps, TensorBoard
scalars, and a loss curve (and final weights) bitwise identical to the same run without the hook,
for the tiny Llama and the tiny Starcoder2."""

import pytest

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import (
    STARCODER2_MODEL_CONFIG,
    TASKS,
    assert_finite_results,
    results_files,
    tensorboard_scalars,
    train_worker,
    write_config,
)


def _check_layout(tmp_path, tp: int, pp: int, dp: int, model_config=None) -> None:
    world = tp * pp * dp
    layout = dict(tp=tp, pp=pp, dp=dp, train_steps=4, model_config=model_config)
    with_hook = write_config(tmp_path, **layout, name="hook.yaml", section={"progress_interval_s": 0})
    without = write_config(tmp_path, **layout, evaluate=False, name="plain.yaml")
    hooked = run_distributed(train_worker, world, str(with_hook), timeout=300)
    plain = run_distributed(train_worker, world, str(without), timeout=300)

    for rank in range(world):
        assert hooked[rank]["evaluated"] == [2, 4]
        assert hooked[rank]["failures"] == []
        assert hooked[rank]["losses"] == plain[rank]["losses"]  # bitwise: floats compared exactly
        assert hooked[rank]["params"] == plain[rank]["params"]
    assert any(loss is not None for result in hooked for loss in result["losses"])
    # setup once for the whole mesh, by the reporting rank: each dataset opened once, the prompts of
    # the one log-likelihood request group (both tasks) tokenized once
    (reporting,) = [report for report in hooked if report["reporting"]]
    assert reporting["setup_counts"] == {"dataset_opens": len(TASKS), "tokenizations": 1}
    assert all(report["setup_counts"] == {} for report in hooked if not report["reporting"])

    found = results_files(tmp_path / "eval")
    assert sorted(found) == [2, 4]
    for step, content in found.items():
        assert content["config_general"]["training_step"] == step
        assert content["config_general"]["consumed_tokens"] == step * 2 * dp * 32  # mbs 2, seq 32
        assert_finite_results(content, TASKS)
        # the evaluation's cost in training steps, and what each task cost
        general = content["config_general"]
        assert general["mean_train_step_s"] > 0
        assert general["eval_cost_train_steps"] == pytest.approx(general["wall_time_s"] / general["mean_train_step_s"])
        assert list(content["task_costs"]) == TASKS
        assert all(content["task_costs"][task]["docs"] == 4 for task in TASKS)  # max_samples 4
        # the signal across the run so far, computed by the hook at this evaluation
        for task in TASKS:
            acc = content["signal"]["series"][task]["acc"]
            assert acc["evaluations"] == {2: 1, 4: 2}[step] and acc["verdict"] == "too few evaluations"
            assert acc["value"] == content["results"][task]["acc"]
    assert (tmp_path / "eval" / "details" / "hook-test" / "2").is_dir()
    assert found[2]["config_general"]["config"]["general"]["consumed_train_samples"] == 2 * 2 * dp  # mbs 2

    scalars = tensorboard_scalars(tmp_path / "eval" / "tensorboard")
    for task in TASKS:
        tags = [tag for tag in scalars if tag.startswith(f"eval/{task}/")]
        assert tags, scalars.keys()
        assert all(sorted(scalars[tag]) == [2, 4] for tag in tags)
    assert sorted(scalars["eval/cost_train_steps"]) == [2, 4]
    assert all(sorted(scalars[f"eval_signal/{task}/acc/verdict_code"]) == [2, 4] for task in TASKS)
    assert all(sorted(scalars[f"eval_time/{task}"]) == [2, 4] for task in TASKS)
    (rank0,) = [report for rank, report in enumerate(hooked) if rank == 0]
    assert len(rank0["eval_log"]) == 2 and all(" training steps: " in line for line in rank0["eval_log"])
    # one line per evaluation (the tables with --verbose): each task's first metric
    assert all("\n" not in line and all(f"{task} acc " in line for task in TASKS) for line in rank0["eval_log"])
    # progress lines in the log, from the reporting rank only (progress_interval_s: 0: at every micro-batch)
    assert all(report["progress_log"] == [] for report in hooked if not report["reporting"])
    for step in (2, 4):
        lines = [
            line
            for line in reporting["progress_log"]
            if line.startswith(f"[lighteval_nanotron] evaluation at step {step}: ")
        ]
        assert lines and all(" docs/s, " in line and line.endswith(" left") for line in lines), reporting[
            "progress_log"
        ]
    assert all(list(report["last_costs"]) == TASKS for report in hooked)


def test_dp2_training_with_evaluation(tmp_path):
    _check_layout(tmp_path, tp=1, pp=1, dp=2)


def test_tp2_pp2_training_with_evaluation(tmp_path):
    _check_layout(tmp_path, tp=2, pp=2, dp=1)


def test_dp2_starcoder2_training_with_evaluation(tmp_path):
    _check_layout(tmp_path, tp=1, pp=1, dp=2, model_config=STARCODER2_MODEL_CONFIG)
