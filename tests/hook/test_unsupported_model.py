"""A model the engine cannot run stops training before step 1, on every rank, with one message
naming the model and what is supported (not an AttributeError from inside the engine)."""

import pytest

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import STARCODER2_MODEL_CONFIG, train_expecting_error_worker, write_config

pytestmark = pytest.mark.distributed


def test_unsupported_starcoder2_option_fails_before_the_first_step_on_every_rank(tmp_path):
    model_config = {**STARCODER2_MODEL_CONFIG, "sliding_window_size": 16}
    config = write_config(tmp_path, dp=2, train_steps=3, model_config=model_config)
    reports = run_distributed(train_expecting_error_worker, 2, [str(config)], timeout=240)
    for (report,) in reports:
        assert report["type"] == "EvaluationError", report
        assert "sliding_window_size=16 is not supported" in report["error"]
        assert "AttributeError" not in report["error"]
        assert report["step"] in (None, 0)  # the trainer never took a step
