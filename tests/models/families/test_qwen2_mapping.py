"""Hugging Face Qwen2 / Qwen2-MoE -> current Nanotron's Qwen2: the config and weight mapping (pure
PyTorch, runs under any Nanotron), and, under Nanotron 0.4 (which has no Qwen2), the refusal at
setup: converting or evaluating a Qwen2 checkpoint stops with one message naming the Nanotron needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lighteval_nanotron.checkpoints.format import CheckpointModel
from lighteval_nanotron.convert import convert_hf_to_nanotron
from lighteval_nanotron.convert.hf_source import SafetensorsWeights
from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
from lighteval_nanotron.models.families.qwen2.conversion import (
    is_hf_qwen2,
    iter_hf_to_nanotron,
    nanotron_config_from_hf,
)
from lighteval_nanotron.models.families.qwen2.tiny import ROPE_THETA, tiny_hf_qwen2, tiny_hf_qwen2_moe
from lighteval_nanotron.nanotron_compat.variant import has_qwen2

REPO = Path(__file__).resolve().parents[3]
LAYER = "model.decoder.{i}.pp_block."
needs_nanotron_04 = pytest.mark.skipif(has_qwen2(), reason="the installed Nanotron has Qwen2 (current main)")


def test_dense_config_is_mapped():
    model = tiny_hf_qwen2(tie=True)
    hf_config = model.config.to_dict()
    assert is_hf_qwen2(hf_config)
    config, rope_theta = nanotron_config_from_hf(hf_config)
    assert rope_theta == config["rope_theta"] == ROPE_THETA
    assert config["is_qwen2_config"] and config["attention_bias"] and not config["rope_interleaved"]
    assert config["tie_word_embeddings"] and config["moe_config"] is None
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["hidden_size"]) == (4, 2, 64)


def test_moe_config_lists_the_sparse_layers():
    config, _ = nanotron_config_from_hf(tiny_hf_qwen2_moe().config.to_dict())
    moe = config["moe_config"]
    assert moe["layers"] == [0, 2] and moe["enable_shared_expert"]  # layer 1 is in mlp_only_layers
    assert (moe["num_experts"], moe["top_k"], moe["moe_intermediate_size"]) == (4, 2, 32)
    assert moe["shared_expert_intermediate_size"] == 48 and config["intermediate_size"] == 96
    stepped = tiny_hf_qwen2_moe(mlp_only_layers=[], decoder_sparse_step=2).config.to_dict()
    assert nanotron_config_from_hf(stepped)[0]["moe_config"]["layers"] == [1]


def test_attention_weights_are_fused_q_then_k_then_v():
    model = tiny_hf_qwen2(tie=False)
    config, _ = nanotron_config_from_hf(model.config.to_dict())
    hf = model.state_dict()
    weights = dict(iter_hf_to_nanotron(hf, config))
    attn = "model.layers.1.self_attn."
    for part in ("weight", "bias"):
        expected = torch.cat([hf[f"{attn}{name}_proj.{part}"] for name in "qkv"])
        assert torch.equal(weights[LAYER.format(i=1) + f"attn.qkv_proj.{part}"], expected)
    gate_up = weights[LAYER.format(i=0) + "mlp.gate_up_proj.weight"]
    assert torch.equal(gate_up[:128], hf["model.layers.0.mlp.gate_proj.weight"])
    assert torch.equal(weights["model.lm_head.pp_block.weight"], hf["lm_head.weight"])
    tied = dict(iter_hf_to_nanotron(tiny_hf_qwen2(tie=True).state_dict(), {**config, "tie_word_embeddings": True}))
    embedding = tied["model.token_position_embeddings.pp_block.token_embedding.weight"]
    assert tied["model.lm_head.pp_block.weight"] is embedding


def _main_moe(weights: dict, prefix: str, x: torch.Tensor, top_k: int) -> torch.Tensor:
    """Nanotron main's MoE layer (nn/moe.py) on `[tokens, hidden]`: float32 router softmax, top-k
    without renormalisation, `tokens @ merged_gate_up_proj[e]` (gate half, up half), SiLU-gated,
    `@ merged_down_proj[e]`, plus the sigmoid-gated shared expert."""
    probs = F.softmax(F.linear(x.float(), weights[f"{prefix}router.weight"]), dim=-1)
    routing, experts = torch.topk(probs, top_k, dim=-1)
    out = torch.zeros_like(x)
    for token in range(x.shape[0]):
        for weight, e in zip(routing[token], experts[token]):
            gate, up = (x[token] @ weights[f"{prefix}experts.merged_gate_up_proj"][e]).chunk(2)
            out[token] += weight * ((F.silu(gate) * up) @ weights[f"{prefix}experts.merged_down_proj"][e])
    gate, up = F.linear(x, weights[f"{prefix}shared_expert.gate_up_proj.weight"]).chunk(2, dim=-1)
    shared = F.linear(F.silu(gate) * up, weights[f"{prefix}shared_expert.down_proj.weight"])
    return out + torch.sigmoid(F.linear(x, weights[f"{prefix}shared_expert_gate.weight"])) * shared


@pytest.mark.parametrize("source", ["hub-files", "in-memory"])
def test_mapped_experts_compute_what_transformers_computes(tmp_path, source):
    """Per-expert Hub files (what save_pretrained writes) and transformers' fused in-memory experts
    map to the same Nanotron weights, which give the HF sparse MoE block's output."""
    model = tiny_hf_qwen2_moe()
    config, _ = nanotron_config_from_hf(model.config.to_dict())
    if source == "hub-files":
        model.save_pretrained(tmp_path)
        hf = SafetensorsWeights(tmp_path)
        assert "model.layers.0.mlp.experts.3.down_proj.weight" in hf
    else:
        hf = model.state_dict()
    weights = dict(iter_hf_to_nanotron(hf, config))
    assert weights[LAYER.format(i=2) + "mlp.experts.merged_gate_up_proj"].shape == (4, 64, 64)
    assert weights[LAYER.format(i=2) + "mlp.experts.merged_down_proj"].shape == (4, 32, 64)
    assert LAYER.format(i=1) + "mlp.gate_up_proj.weight" in weights  # the dense layer
    x = torch.randn(7, 64)
    with torch.no_grad():
        expected = model.model.layers[2].mlp(x[None])[0]
    assert torch.allclose(_main_moe(weights, LAYER.format(i=2) + "mlp.", x, top_k=2), expected, atol=1e-5)


@pytest.mark.parametrize(
    ("build", "overrides", "message"),
    [
        (tiny_hf_qwen2_moe, {"norm_topk_prob": True}, "norm_topk_prob: true"),
        (tiny_hf_qwen2, {"use_sliding_window": True, "sliding_window": 64, "max_window_layers": 0}, "window=64"),
        (tiny_hf_qwen2_moe, {"use_sliding_window": True, "sliding_window": 64, "max_window_layers": 3}, "< max_pos"),
        (tiny_hf_qwen2_moe, {"hidden_act": "gelu"}, "hidden_act='gelu'"),
    ],
    ids=["norm-topk", "sliding-window", "moe-sliding-window", "activation"],
)
def test_options_the_target_cannot_represent_are_refused(build, overrides, message):
    with pytest.raises(CheckpointError, match=message):
        nanotron_config_from_hf(build(**overrides).config.to_dict())
    unwindowed = build(use_sliding_window=True, sliding_window=512, max_window_layers=3).config.to_dict()
    assert nanotron_config_from_hf(unwindowed)[0]["sliding_window_size"] is None  # the window covers the context


@needs_nanotron_04
def test_converting_qwen2_under_nanotron_04_is_refused_before_writing(tmp_path):
    tiny_hf_qwen2().save_pretrained(tmp_path / "hf")
    with pytest.raises(UnsupportedModelError, match="Qwen2.*current Nanotron"):
        convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "nanotron")
    assert not (tmp_path / "nanotron").exists()


@needs_nanotron_04
def test_evaluating_a_qwen2_checkpoint_under_nanotron_04_prints_one_error_line(tmp_path):
    checkpoint = tmp_path / "qwen2"
    (checkpoint / "model").mkdir(parents=True)
    (checkpoint / "checkpoint_metadata.json").write_text("{}")
    config, _ = nanotron_config_from_hf(tiny_hf_qwen2_moe().config.to_dict())
    (checkpoint / "model_config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="describes a qwen2 model"):
        CheckpointModel.from_fields(config)
    command = [sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", "--tasks",
               "lighteval|arc:easy|0", "--max-samples", "2", "--data-dir", "bundled", "--output-dir",
               str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1, done.stderr[-3000:]
    assert "describes a qwen2 model" in errors[0] and "needs current Nanotron" in errors[0]
    assert "Traceback" not in done.stderr
