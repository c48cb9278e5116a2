"""A model the engine cannot run stops training before step 1, on every rank, with one message
naming the model and what is supported (not an AttributeError from inside the engine)."""

from lighteval_nanotron.training import run_train
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_versions import only_on_main
from tests.hook.training_runs import STARCODER2_MODEL_CONFIG, train_expecting_error_worker, write_config


def test_unsupported_starcoder2_option_fails_before_the_first_step_on_every_rank(tmp_path):
    model_config = {**STARCODER2_MODEL_CONFIG, "sliding_window_size": 16}
    config = write_config(tmp_path, dp=2, train_steps=3, model_config=model_config)
    reports = run_distributed(train_expecting_error_worker, 2, [str(config)], timeout=240)
    for (report,) in reports:
        assert report["type"] == "EvaluationError", report
        assert "sliding_window_size=16 is not supported" in report["error"]
        assert "AttributeError" not in report["error"]
        assert report["step"] in (None, 0)  # the trainer never took a step


@only_on_main
def test_starcoder2_under_main_is_refused_while_the_config_is_read_on_every_rank(tmp_path, capsys):
    """Main's Config cannot hold a Starcoder2 (it reads num_key_value_heads): one message naming the
    config class and what main can train, not main's AttributeError; `train` prints it once, exit 2.
    (Starcoder2 checkpoints still evaluate under main: tests/models/test_starcoder2_engine.py.)"""
    model_config = STARCODER2_MODEL_CONFIG
    config = write_config(tmp_path, dp=2, train_steps=3, model_config=model_config, skip_unconfigurable=False)
    reports = run_distributed(train_expecting_error_worker, 2, [str(config)], timeout=240)
    for (report,) in reports:
        assert report["type"] == "UnsupportedModelError", report
        assert report["step"] is None  # the trainer was never built
        message = report["error"]
        assert message.startswith("Model config class Starcoder2Config (starcoder2) cannot go into a training config")
        assert "num_key_value_heads" in message and "nanotron==0.4" in message
        assert "Supported for training with it: llama (LlamaConfig" in message
        assert "qwen2 (Qwen2Config" in message and "starcoder2 (" not in message
        assert "\n" not in message
    assert run_train.main(["--config-file", str(config), "--cpu", "--nproc", "2"]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "train.yaml: Model config class Starcoder2Config (starcoder2) cannot go into a training config" in line
