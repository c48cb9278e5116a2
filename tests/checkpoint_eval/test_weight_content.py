"""A checkpoint whose weights no trained model has is refused before it is loaded, with the weight
named: a shard of an integer dtype (the right shape), a data region overwritten with zeros (header
intact), a constant matrix, NaN or inf values, a norm weight at zero. What initialisation leaves
(norms at one, biases at zero) is accepted. Real files of the tiny checkpoints; `eval` at TP2."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from lighteval_nanotron.checkpoints.content import check_weight_content
from lighteval_nanotron.checkpoints.format import saved_weight_shapes
from lighteval_nanotron.checkpoints.integrity import integrity_problems
from lighteval_nanotron.errors import CheckpointError
from tests.checkpoint_eval.test_eval_errors import _evaluate_each
from tests.helpers.distributed import run_distributed

LAYER = "model/model/decoder/1/pp_block"
SHARD = "model_weight_pp-rank-0-of-1_tp-rank-0-of-1.safetensors"
FILES = {
    "qkv": f"{LAYER}/attn/qkv_proj/{SHARD}",
    "down": f"{LAYER}/mlp/down_proj/{SHARD}",
    "o_proj": f"{LAYER}/attn/o_proj/{SHARD}",
    "embedding": f"model/model/token_position_embeddings/pp_block/token_embedding/{SHARD}",
    "norm": f"{LAYER}/input_layernorm/model_weight.safetensors",
}


def _rewrite(file: Path, change) -> None:
    """Save `change(tensor)` in place of a weight file's data, keeping Nanotron's metadata."""
    with safe_open(str(file), framework="pt") as handle:
        metadata, tensor = handle.metadata(), handle.get_tensor("data")
    save_file({"data": change(tensor.clone())}, str(file), metadata=metadata)


def _zero_data_region(file: Path) -> None:
    """Overwrite every byte after the safetensors header with zeros (the header stays valid)."""
    raw = bytearray(file.read_bytes())
    start = 8 + struct.unpack("<Q", raw[:8])[0]
    raw[start:] = bytes(len(raw) - start)
    file.write_bytes(bytes(raw))


def _set(index: tuple, value: float):
    def change(tensor: torch.Tensor) -> torch.Tensor:
        tensor[index] = value
        return tensor

    return change


DAMAGES = {
    "zeroed": ("qkv", _zero_data_region, "decoder.1.pp_block.attn.qkv_proj.weight: every one of the"),
    "constant": ("down", lambda f: _rewrite(f, lambda t: torch.full_like(t, 0.5)), "is 0.5 (a constant matrix)"),
    "nan": ("embedding", lambda f: _rewrite(f, _set((3, 5), float("nan"))), "token_embedding.weight: "),
    "inf": ("norm", lambda f: _rewrite(f, _set((7,), float("-inf"))), "input_layernorm.weight: "),
    "zero_norm": ("norm", lambda f: _rewrite(f, torch.zeros_like), "is all zeros (a norm weight at zero"),
}


def _damaged_copy(checkpoint: Path, root: Path, name: str) -> Path:
    key, damage, _ = DAMAGES.get(name, ("o_proj", None, ""))
    copy = root / name
    shutil.copytree(checkpoint, copy)
    if name == "integer":
        _rewrite(copy / FILES[key], lambda t: (t * 100).to(torch.int64))
    else:
        damage(copy / FILES[key])
    return copy


def test_weight_values_no_trained_model_has_are_refused_with_the_weight_named(tiny_converted, tmp_path):
    _, tiny_checkpoint = tiny_converted
    check_weight_content(tiny_checkpoint)  # the random tiny model passes
    for name, (_, _, expected) in DAMAGES.items():
        with pytest.raises(CheckpointError) as caught:
            check_weight_content(_damaged_copy(tiny_checkpoint, tmp_path, name))
        message = str(caught.value)
        assert expected in message and "re-copy them" in message, (name, message)
        if name in ("nan", "inf"):
            assert "holds 1 NaN/inf value(s)" in message


def test_an_integer_shard_of_the_right_shape_is_refused_from_its_header(tiny_converted, tmp_path):
    copy = _damaged_copy(tiny_converted[1], tmp_path, "integer")
    problems = integrity_problems(copy, saved_weight_shapes(copy))
    assert len(problems) == 1 and problems[0].startswith("model.decoder.1.pp_block.attn.o_proj.weight: ")
    assert "holds I64 data, not floating point" in problems[0]


def _fresh_model_content(model_config_json: str, path: str) -> str:
    """run_distributed worker: a model with Nanotron's own initialisation (norms at 1, biases at 0),
    saved, then checked."""
    import json

    from lighteval_nanotron.checkpoints.format import CheckpointModel
    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model, save_nanotron_checkpoint
    from tests.helpers.distributed import parallel_context

    model_config = CheckpointModel.from_fields(json.loads(model_config_json)).model_config
    context = parallel_context(1, 1, 1)
    model = build_nanotron_model(model_config, context)
    constant = sorted(name for name, p in model.named_parameters() if p.numel() > 1 and p.min() == p.max())
    save_nanotron_checkpoint(model, model_config, context, path)
    check_weight_content(path, context.world_pg)
    return constant


def test_freshly_initialised_norms_and_zero_biases_are_accepted(tmp_path):
    import dataclasses
    import json

    from lighteval_nanotron.models.families.starcoder2.tiny import tiny_starcoder2_config

    config = json.dumps(dataclasses.asdict(tiny_starcoder2_config()))
    constant = run_distributed(_fresh_model_content, 1, config, str(tmp_path / "fresh"), timeout=120)[0]
    assert any(name.endswith("bias") for name in constant) and any("ln" in name for name in constant), constant


def test_eval_refuses_damaged_weights_and_a_bigger_tokenizer_on_every_rank_keeping_results(tiny_converted, tmp_path):
    from tests.models.test_vocabulary import _bigger_tokenizer

    _, checkpoint = tiny_converted
    copies = {name: _damaged_copy(checkpoint, tmp_path / "ckpt", name) for name in ("integer", "zeroed")}
    _bigger_tokenizer().save_pretrained(tmp_path / "bigger_tokenizer")
    out = tmp_path / "out"
    base = dict(tasks="lighteval|arc:easy|0", tp=2, cpu=True, max_samples=2, data_dirs=["bundled"],
                output_dir=str(out), model_name="run", loggers=["json"])  # fmt: skip
    cases = [({**base, "checkpoint": str(checkpoint)}, {})]
    cases += [({**base, "checkpoint": str(copies[name])}, {}) for name in ("integer", "zeroed")]
    cases += [({**base, "checkpoint": str(checkpoint), "tokenizer": str(tmp_path / "bigger_tokenizer")}, {})]
    outcomes = run_distributed(_evaluate_each, 2, cases, timeout=240)
    (written,) = (out / "results" / "run").rglob("results_*.json")
    before = written.read_bytes()
    for rank in outcomes:
        assert rank[0] == ("ok", "")
        assert rank[1][0] == "CheckpointError" and "o_proj.weight: " in rank[1][1] and "I64" in rank[1][1]
        assert rank[2][0] == "CheckpointError" and "qkv_proj.weight: every one of the" in rank[2][1]
        assert rank[3][0] == "ConfigError" and "has 1025 token ids" in rank[3][1] and "has 1024" in rank[3][1]
    assert list((out / "results" / "run").rglob("*.json")) == [written] and written.read_bytes() == before
