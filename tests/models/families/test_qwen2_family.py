"""The Qwen2 family's config side and its refusals: recorded configs (with a nested `moe_config`)
read into current Nanotron's `Qwen2Config`, options the engine cannot run refused with the option's
name, expert-parallel models and shards refused. The shard-name check runs under any Nanotron."""

from __future__ import annotations

import dataclasses

import pytest

from lighteval_nanotron.checkpoints.format import CheckpointModel, weight_files
from lighteval_nanotron.errors import CheckpointError, UnsupportedModelError
from lighteval_nanotron.models.families.qwen2.conversion import nanotron_config_from_hf
from lighteval_nanotron.models.families.qwen2.tiny import tiny_hf_qwen2_moe
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_main import requires_qwen2


def _moe_fields() -> dict:
    return nanotron_config_from_hf(tiny_hf_qwen2_moe().config.to_dict())[0]


def test_expert_parallel_shards_are_refused(tmp_path):
    folder = tmp_path / "model" / "model" / "decoder" / "0" / "pp_block" / "mlp" / "experts"
    folder.mkdir(parents=True)
    (folder / "model_merged_down_proj_pp-rank-0-of-1_tp-rank-0-of-1_exp-rank-1-of-2.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="expert-parallel shard.*expert_parallel_size: 1"):
        weight_files(tmp_path)


@requires_qwen2
def test_recorded_moe_config_is_read_and_written_back():
    fields = _moe_fields()
    checkpoint_model = CheckpointModel.from_fields(fields)
    config = checkpoint_model.model_config
    assert type(config).__name__ == "Qwen2Config" and type(config.moe_config).__name__ == "MoEConfig"
    assert config.moe_config.layers == [0, 2] and checkpoint_model.carried == {}
    assert checkpoint_model.config_fields() == dataclasses.asdict(config)
    with pytest.raises(CheckpointError, match=r"moe_config.*capacity_factor"):
        CheckpointModel.from_fields({**fields, "moe_config": {**fields["moe_config"], "capacity_factor": 1.0}})


@requires_qwen2
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sliding_window_size": 64}, "sliding_window_size=64"),
        ({"rope_seq_len_interpolation_factor": 2.0}, "rope_seq_len_interpolation_factor=2.0"),
        ({"_use_qkv_packed": False}, "_use_qkv_packed: false"),
    ],
    ids=["sliding-window", "interpolation", "unpacked-qkv"],
)
def test_options_the_engine_cannot_run_are_refused(overrides, message):
    with pytest.raises(UnsupportedModelError, match=message):
        CheckpointModel.from_fields({**_moe_fields(), **overrides})


def engine_setup_with_expert_parallelism(fields: dict) -> str:
    """Rank function (world 1): an MoE Qwen2 built with `expert_parallel_size=2`, handed to the engine."""
    from nanotron.config import ParallelismArgs

    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model
    from lighteval_nanotron.models.engine import NanotronLightevalModel
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(1, 1, 1)
    model_config = CheckpointModel.from_fields(fields).model_config
    parallel = ParallelismArgs(dp=1, pp=1, tp=1, expert_parallel_size=2)
    model = build_nanotron_model(model_config, context, parallel_config=parallel)
    try:
        NanotronLightevalModel(model, context, tiny_tokenizer())
    except UnsupportedModelError as error:
        return str(error)
    return "not refused"


@requires_qwen2
def test_expert_parallel_model_is_refused_at_engine_setup():
    (message,) = run_distributed(engine_setup_with_expert_parallelism, 1, _moe_fields(), timeout=120)
    assert "expert_parallel_size=2 is not supported" in message
