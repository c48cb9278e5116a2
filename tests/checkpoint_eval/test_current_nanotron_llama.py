"""A Llama checkpoint in current Nanotron's format (GitHub main: `rope_theta`, `rope_interleaved:
false` with q/k rows in Hugging Face order, `_attn_implementation`, `attention_bias`, `z_loss_*`)
loads under Nanotron 0.4 and evaluates like transformers at TP1 and at PP2.

The checkpoint is written the way main's own converter (`examples/llama/convert_hf_to_nanotron.py`,
`interleave_qkv=False`) lays the weights out, with main's model-config keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model
from lighteval_nanotron.convert import nanotron_to_hf
from lighteval_nanotron.convert.nanotron_writer import write_nanotron_checkpoint
from lighteval_nanotron.errors import UnsupportedModelError
from lighteval_nanotron.models.families.llama.conversion import (
    LlamaShape,
    deinterleave_rotary,
    iter_hf_to_nanotron,
    nanotron_config_from_hf,
)
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.checkpoint_eval.tiny_hf import ROPE_THETA, tiny_hf_llama
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_versions import skip_on_main
from tests.helpers.tiers import reaches
from tests.helpers.tiny_model import tiny_tokenizer

MAIN_KEYS = {"_attn_implementation": "sdpa", "attention_bias": False, "z_loss_enabled": False,
             "z_loss_coefficient": 0.0001}  # fmt: skip
TOLERANCE = 1e-4


def _main_layout(weights, shape: LlamaShape):
    """Nanotron weights with q/k rows back in Hugging Face (half-split) order, as main stores them."""
    q_rows, kv_rows = shape.num_heads * shape.head_dim, shape.num_kv_heads * shape.head_dim
    for name, tensor in weights:
        if name.endswith("attn.qkv_proj.weight"):
            q, k, v = torch.split(tensor, [q_rows, kv_rows, kv_rows], dim=0)
            tensor = torch.cat([deinterleave_rotary(q, shape.num_heads), deinterleave_rotary(k, shape.num_kv_heads), v])
        yield name, tensor


@reaches("distributed")  # writing a checkpoint starts a one-process gloo group
def _write_main_checkpoint(folder: Path):
    model = tiny_hf_llama(seed=0)
    config, rope_theta = nanotron_config_from_hf(model.config.to_dict())
    checkpoint_model = CheckpointModel.from_fields({**config, "rope_theta": rope_theta, "rope_interleaved": False})
    weights = iter_hf_to_nanotron(model.state_dict(), LlamaShape.from_nanotron_config(config))
    write_nanotron_checkpoint(folder, checkpoint_model, _main_layout(weights, LlamaShape.from_nanotron_config(config)),
                              torch.float32)  # fmt: skip
    fields = {**json.loads((folder / "model_config.json").read_text()), **MAIN_KEYS}
    (folder / "model_config.json").write_text(json.dumps(fields))
    training = yaml.safe_load((folder / "config.yaml").read_text())
    training["model"]["model_config"] = fields
    (folder / "config.yaml").write_text(yaml.safe_dump(training))
    tiny_tokenizer().save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def main_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("main_llama") / "ckpt"
    return _write_main_checkpoint(folder), folder


@skip_on_main(
    "checks how Nanotron 0.4 carries main's keys beside its LlamaConfig; with main they are its config's fields"
)
def test_main_llama_keys_are_read_and_carried(main_checkpoint):
    _, folder = main_checkpoint
    recorded = json.loads((folder / "model_config.json").read_text())
    assert recorded["rope_interleaved"] is False and recorded["rope_theta"] == ROPE_THETA
    assert set(MAIN_KEYS) <= set(recorded)
    checkpoint_model = read_checkpoint_model(folder)
    assert checkpoint_model.carried == {"rope_theta": ROPE_THETA, "rope_interleaved": False}


def test_attention_bias_is_refused(main_checkpoint):
    _, folder = main_checkpoint
    fields = {**json.loads((folder / "model_config.json").read_text()), "attention_bias": True}
    with pytest.raises(UnsupportedModelError, match="attention_bias=True"):
        CheckpointModel.from_fields(fields)


def test_main_llama_checkpoint_converts_back_to_the_hf_weights(main_checkpoint):
    """Q/k rows recorded in Hugging Face order (`rope_interleaved: false`) are exported as they are,
    with the recorded RoPE base (a model config field under current Nanotron, carried under 0.4)."""
    model, folder = main_checkpoint
    hf_config, state_dict = nanotron_to_hf(folder)
    assert hf_config["rope_theta"] == ROPE_THETA
    for name, tensor in model.state_dict().items():
        assert torch.equal(state_dict[name], tensor), name


def _cli_main(argv: list) -> int:
    from lighteval_nanotron.cli.main import main

    return main(argv)


@pytest.mark.parametrize("layout", [(), ("--pp", "2")], ids=["tp1", "pp2"])
def test_main_llama_checkpoint_scores_like_transformers(main_checkpoint, tmp_path, layout):
    model, folder = main_checkpoint
    argv = ["eval", str(folder), "--cpu", "--tasks", "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0",
            "--max-samples", "4", "--data-dir", "bundled", "--output-dir", str(tmp_path), *layout]  # fmt: skip
    world = 2 if layout else 1
    assert run_distributed(_cli_main, world, argv, timeout=240) == [0] * world
    (step_dir,) = (tmp_path / "details" / "converted" / "ckpt").iterdir()
    assert max_logprob_difference(model, read_details(step_dir), tiny_tokenizer()) < TOLERANCE


def test_converts_back_to_the_hugging_face_weights(main_checkpoint):
    """`rope_interleaved: false` rows are already in Hugging Face order: converted back as they are,
    with the recorded rope_theta (under either Nanotron: main's LlamaConfig has both fields)."""
    from lighteval_nanotron.convert import nanotron_to_hf

    model, folder = main_checkpoint
    hf_config, weights = nanotron_to_hf(folder)
    assert hf_config["rope_theta"] == ROPE_THETA
    expected = model.state_dict()
    assert {name for name in expected if "proj" in name} <= set(weights)
    for name, tensor in weights.items():
        assert torch.equal(tensor, expected[name]), name
