"""Every model reaches the engine through its family; anything else is refused with one message
naming the model class and what is supported (in code, and as one `error:` line from `eval`)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lighteval_nanotron.errors import UnsupportedModelError
from lighteval_nanotron.models.checkpoint.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.models.families import LlamaFamily, Starcoder2Family, family_of_fields, family_of_model
from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config
from lighteval_nanotron.models.families.starcoder2.tiny import tiny_starcoder2_config

REPO = Path(__file__).resolve().parents[3]


def test_unsupported_model_class_is_refused_with_what_is_supported():
    with pytest.raises(UnsupportedModelError) as caught:
        family_of_model(torch.nn.Linear(2, 2))
    message = str(caught.value)
    assert "Model class Linear is not supported" in message
    assert "llama (LlamaForTraining, LlamaModel)" in message
    assert "starcoder2 (Starcoder2ForTraining, GPTModel)" in message


def test_recorded_configs_find_their_family():
    import dataclasses

    assert family_of_fields(dataclasses.asdict(tiny_llama_config())) is LlamaFamily
    assert family_of_fields(dataclasses.asdict(tiny_starcoder2_config())) is Starcoder2Family
    starcoder2 = CheckpointModel.from_fields(dataclasses.asdict(tiny_starcoder2_config()))
    assert starcoder2.family is Starcoder2Family and starcoder2.model_config.rope_theta == 50000


def test_unknown_architecture_and_unsupported_option_are_refused():
    import dataclasses

    with pytest.raises(UnsupportedModelError, match="describes a is_gemma_config: true model.*Supported Nanotron"):
        CheckpointModel.from_fields({"is_gemma_config": True, "hidden_size": 64, "rms_norm_eps": 1e-6})
    fields = {**dataclasses.asdict(tiny_starcoder2_config()), "sliding_window_size": 4096}
    with pytest.raises(UnsupportedModelError, match="sliding_window_size=4096 is not supported"):
        CheckpointModel.from_fields(fields)


def test_eval_of_an_unsupported_checkpoint_prints_one_error_line(tiny_starcoder2_checkpoint, tmp_path):
    checkpoint = tmp_path / "mamba"
    shutil.copytree(tiny_starcoder2_checkpoint, checkpoint)
    (checkpoint / "model_config.json").write_text(json.dumps({"is_mamba_config": True, "d_model": 64}))
    with pytest.raises(UnsupportedModelError):
        read_checkpoint_model(checkpoint)
    command = [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks", "lighteval|arc:easy|0",
        "--max-samples", "2", "--data-dir", "bundled", "--output-dir", str(tmp_path / "out"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert "is_mamba_config: true" in errors[0] and "starcoder2 (Starcoder2Config" in errors[0]
    assert "Traceback" not in done.stderr
