"""run_distributed fails fast and never hangs; CPU support is off unless enabled; layout and checkpoint errors."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lighteval_nanotron.errors import CheckpointError, ConfigError, LayoutError
from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config  # noqa: F401
from lighteval_nanotron.parallel.distributed import check_layout, init_process_group_from_env
from tests.helpers.distributed import DistributedRunError, parallel_context, run_distributed
from tests.helpers.nanotron_versions import skip_on_main
from tests.helpers.tiny_model import tiny_checkpoint, tiny_tokenizer  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def _ranks(tp: int, pp: int, dp: int):
    import torch.distributed as dist

    context = parallel_context(tp, pp, dp)
    return dist.get_rank(), dist.get_rank(context.tp_pg), dist.get_rank(context.pp_pg), dist.get_rank(context.dp_pg)


def _raise_on_rank_one():
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("boom from rank one")
    dist.barrier()  # rank 0 would wait here forever


def _sleep(seconds: float):
    time.sleep(seconds)


def _load_at(checkpoint: str, tp: int, pp: int, dp: int):
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint

    load_nanotron_checkpoint(checkpoint, parallel_context(tp, pp, dp))


def test_run_distributed_returns_per_rank_values_and_builds_layouts():
    assert run_distributed(_ranks, 4, 2, 2, 1, timeout=60) == [(0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 1, 0), (3, 1, 1, 0)]


def test_a_raising_rank_fails_the_run_quickly():
    start = time.monotonic()
    with pytest.raises(DistributedRunError, match=r"\[rank 1\] .*ValueError: boom"):
        run_distributed(_raise_on_rank_one, 2, timeout=60)
    assert time.monotonic() - start < 20


def test_a_run_past_its_timeout_fails():
    start = time.monotonic()
    with pytest.raises(DistributedRunError, match="timed out after 3 s"):
        run_distributed(_sleep, 2, 60.0, timeout=3)
    assert time.monotonic() - start < 20


def test_a_layout_that_does_not_fit_the_model_raises_layout_error(tiny_checkpoint):
    with pytest.raises(DistributedRunError, match="LayoutError: TP=3"):
        run_distributed(_load_at, 3, str(tiny_checkpoint), 3, 1, 1, timeout=60)


def test_cpu_support_is_off_until_enabled_and_enabling_is_idempotent():
    script = """
import sys, torch
import lighteval_nanotron, lighteval_nanotron.cpu as cpu
import lighteval_nanotron.parallel.distributed, lighteval_nanotron.checkpoints.nanotron_builder
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron
assert "flash_attn" not in sys.modules and "nanotron.models.llama" not in sys.modules
assert not cpu.is_cpu_support_enabled()
sync = torch.cuda.synchronize
cpu.import_nanotron()
from nanotron.parallel.context import ParallelContext
original_set_device = ParallelContext.set_device
# current Nanotron's nanotron.config imports flash-attn (config/config.py:28, the pipeline engine -> nn/):
# import_nanotron installs the stand-in before it (nanotron_compat/imports.py); 0.4 needs it only for the models
assert ("flash_attn" in sys.modules) == (installed_nanotron().name == "main") and torch.cuda.synchronize is sync
cpu.enable_cpu_support()
import nanotron.models.llama as llama
patched = (ParallelContext.set_device, llama.P2P, torch.cuda.synchronize, sys.modules["flash_attn"])
assert patched[0] is not original_set_device and llama.P2P.__name__ == "CpuP2P" and patched[2] is not sync
cpu.enable_cpu_support()
assert patched == (ParallelContext.set_device, llama.P2P, torch.cuda.synchronize, sys.modules["flash_attn"])
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_layout_checks():
    from lighteval_nanotron.checkpoints.nanotron_builder import check_model_layout

    config = tiny_llama_config()
    check_model_layout(config, tp=2, pp=4)
    with pytest.raises(LayoutError, match="num_attention_heads=4"):
        check_model_layout(config, tp=8, pp=1)
    with pytest.raises(LayoutError, match="num_key_value_heads=2"):
        check_model_layout(config, tp=4, pp=1)
    with pytest.raises(LayoutError, match="PP=5 .*num_hidden_layers=4"):
        check_model_layout(config, tp=1, pp=5)
    with pytest.raises(LayoutError, match="world size 2"):
        check_layout(2, 2, 1, world_size=2)


def test_missing_torchrun_variables_raise_config_error(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT"):
        init_process_group_from_env()


def test_checkpoint_errors(tmp_path, tiny_checkpoint):
    from lighteval_nanotron.checkpoints.format import read_checkpoint_model
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint

    with pytest.raises(CheckpointError, match="does not exist"):
        read_checkpoint_model(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="model_config.json nor config.yaml"):
        read_checkpoint_model(tmp_path)
    (tmp_path / "model_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="Cannot read the model config"):
        read_checkpoint_model(tmp_path)
    values = json.loads((tiny_checkpoint / "model_config.json").read_text())
    (tmp_path / "model_config.json").write_text(json.dumps({**values, "sliding_window": 4096}))
    with pytest.raises(CheckpointError, match="does not know: sliding_window"):
        read_checkpoint_model(tmp_path)
    (tmp_path / "model_config.json").write_text(json.dumps({**values, "rope_theta": "large"}))
    with pytest.raises(CheckpointError, match="rope_theta='large'"):
        read_checkpoint_model(tmp_path)
    (tmp_path / "model_config.json").write_text(json.dumps([values]))
    with pytest.raises(CheckpointError, match="is not a mapping"):
        read_checkpoint_model(tmp_path)
    (tmp_path / "model_config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match="has no model"):
        load_nanotron_checkpoint(tmp_path, parallel_context=None)


@skip_on_main(
    "current Nanotron's LlamaConfig has rope_theta as a field (nanotron/config/models_config.py:84 at 2411b02): "
    "its model config always records it, in the config, never as a carried field"
)
def test_checkpoint_model_reads_rope_theta_and_records_it_only_when_not_the_default(tiny_checkpoint, tmp_path):
    from lighteval_nanotron.checkpoints.format import CheckpointModel, read_checkpoint_model

    tiny = read_checkpoint_model(tiny_checkpoint)
    assert tiny.rope_theta == 10000.0 and "rope_theta" not in tiny.config_fields()
    smollm2_like = CheckpointModel(tiny.model_config, 100000.0)
    (tmp_path / "model_config.json").write_text(json.dumps(smollm2_like.config_fields()))
    assert read_checkpoint_model(tmp_path) == smollm2_like


def test_checkpoint_dtype(tiny_checkpoint, tmp_path):
    from lighteval_nanotron.checkpoints.format import read_checkpoint_dtype

    assert read_checkpoint_dtype(tmp_path) is None
    (tmp_path / "config.yaml").write_text("model:\n  dtype: torch.bfloat16\n")
    assert read_checkpoint_dtype(tmp_path) == torch.bfloat16
    (tmp_path / "config.yaml").write_text("model:\n  dtype: int8\n")
    with pytest.raises(CheckpointError, match="model.dtype 'int8'.*floating-point"):
        read_checkpoint_dtype(tmp_path)


def test_weights_that_do_not_match_the_model_config_raise_checkpoint_error(tiny_checkpoint, tmp_path):
    """At TP2 Nanotron's loader would slice the saved (larger) MLP weights without a word."""
    shrunk = tmp_path / "shrunk"
    shutil.copytree(tiny_checkpoint, shrunk)
    values = json.loads((shrunk / "model_config.json").read_text())
    (shrunk / "model_config.json").write_text(json.dumps({**values, "intermediate_size": 64}))
    with pytest.raises(DistributedRunError, match=r"CheckpointError: .*gate_up_proj.weight: .*full shape"):
        run_distributed(_load_at, 2, str(shrunk), 2, 1, 1, timeout=60)


def test_checkpoint_config_yaml_is_enough_and_keeps_the_tokenizer(tiny_checkpoint, tmp_path):
    from transformers import AutoTokenizer

    from lighteval_nanotron.checkpoints.format import read_checkpoint_dtype, read_checkpoint_model

    (tmp_path / "config.yaml").write_text((tiny_checkpoint / "config.yaml").read_text())
    assert read_checkpoint_model(tmp_path) == read_checkpoint_model(tiny_checkpoint)
    assert read_checkpoint_dtype(tiny_checkpoint) == torch.float32
    text = "The quick brown fox jumps over the lazy dog."
    assert AutoTokenizer.from_pretrained(str(tiny_checkpoint))(text).input_ids == tiny_tokenizer()(text).input_ids


def test_tiny_tokenizer_is_deterministic_and_round_trips():
    tokenizer = tiny_tokenizer()
    text = "Question: What is 2 + 2?\nAnswer: 4<|endoftext|>"
    ids = tokenizer(text).input_ids
    assert len(tokenizer) == 1024 and ids[-1] == tokenizer.eos_token_id == 1023
    assert tokenizer.decode(ids) == text
    assert tiny_tokenizer()(text).input_ids == ids
