"""Every model reaches the engine through its family; anything else is refused with one message
naming the model class and what is supported (in code, and as one `error:` line from `eval`)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
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

    with pytest.raises(UnsupportedModelError, match="is_gemma_config: true.*Supported"):
        CheckpointModel.from_fields({"is_gemma_config": True, "hidden_size": 64, "rms_norm_eps": 1e-6})
    fields = {**dataclasses.asdict(tiny_starcoder2_config()), "sliding_window_size": 4096}
    with pytest.raises(UnsupportedModelError, match="sliding_window_size=4096"):
        CheckpointModel.from_fields(fields)


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("tie_word_embeddings", "false", "tie_word_embeddings='false': give true or false"),  # a truthy string
        ("vocab_size", "1024", "vocab_size='1024': give an integer"),
        ("num_attention_heads", 4.0, "num_attention_heads=4.0: give an integer"),
        ("rms_norm_eps", "1e-5", "rms_norm_eps='1e-5': give a number"),
        ("rope_scaling", ["linear"], "rope_scaling=['linear']: give a mapping or null"),
        ("num_hidden_layers", -1, "num_hidden_layers=-1: a size or count is 1 or more"),
        ("hidden_size", 0, "hidden_size=0: a size or count is 1 or more"),
        ("rope_theta", "10000", "rope_theta='10000', not a number"),
    ],
)
def test_a_recorded_value_of_another_type_is_refused_naming_the_key(tmp_path, key, value, words):
    """Read by `config_class(**fields)` alone, `"false"` tied the embeddings and `"1024"` or `4.0`
    failed deep in the model build with a TypeError."""
    import dataclasses

    (tmp_path / "model_config.json").write_text(json.dumps({**dataclasses.asdict(tiny_llama_config()), key: value}))
    with pytest.raises(CheckpointError, match=re.escape(words)):
        read_checkpoint_model(tmp_path)


def test_recorded_numbers_in_either_json_form_are_read():
    import dataclasses

    whole = {"rms_norm_eps": 1, "rope_theta": 10000}
    llama = CheckpointModel.from_fields({**dataclasses.asdict(tiny_llama_config()), **whole})
    assert llama.model_config.rms_norm_eps == 1 and llama.rope_theta == 10000.0
    fields = {**dataclasses.asdict(tiny_starcoder2_config()), "rope_theta": 999999.44}  # annotated int by Nanotron
    assert CheckpointModel.from_fields(fields).model_config.rope_theta == 999999.44


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
