"""The hook inside a bf16 training with sequence-parallel TP (`tp_mode: REDUCE_SCATTER`, TP2):
results at the configured steps, and a loss curve and final weights bitwise identical to the
same training without the hook (evaluation switches the TP linears to all-reduce form and back)."""

import yaml

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import TASKS, assert_finite_results, results_files, train_worker, write_config


def _bf16_sequence_parallel(path):
    content = yaml.safe_load(path.read_text())
    content["model"]["dtype"] = "bfloat16"
    content["optimizer"]["accumulate_grad_in_fp32"] = True  # Nanotron 0.4 asserts it for non-fp32 params
    content["parallelism"].update(tp_mode="REDUCE_SCATTER", tp_linear_async_communication=False)
    path.write_text(yaml.safe_dump(content))
    return path


def test_bf16_reduce_scatter_training_with_evaluation_is_bitwise_unchanged(tmp_path):
    with_hook = _bf16_sequence_parallel(write_config(tmp_path, tp=2, train_steps=4, name="hook.yaml"))
    without = _bf16_sequence_parallel(write_config(tmp_path, tp=2, train_steps=4, evaluate=False, name="plain.yaml"))
    hooked = run_distributed(train_worker, 2, str(with_hook), timeout=300)
    plain = run_distributed(train_worker, 2, str(without), timeout=300)
    for rank in range(2):
        assert hooked[rank]["evaluated"] == [2, 4] and hooked[rank]["failures"] == []
        assert hooked[rank]["losses"] == plain[rank]["losses"]  # bitwise: floats compared exactly
        assert hooked[rank]["params"] == plain[rank]["params"]
        assert hooked[rank]["tp_modes"] == ["REDUCE_SCATTER"]  # the trainer's mode, back after evaluating
    assert any(loss is not None for loss in hooked[0]["losses"])
    for content in results_files(tmp_path / "eval").values():
        assert_finite_results(content, TASKS)
