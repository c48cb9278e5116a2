import json
import re
import shutil

import pytest
import torch
import yaml
from safetensors import safe_open

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from lighteval_nanotron.convert import convert_hf_to_nanotron, nanotron_to_hf
from lighteval_nanotron.errors import CheckpointError
from tests.convert.tiny_llama import VOCAB, nanotron_logits, tiny_hf_llama
from tests.helpers.distributed import parallel_context, run_distributed
from tests.helpers.nanotron_versions import ON_MAIN
from tests.helpers.tiers import reaches

INPUT_IDS = torch.randint(0, VOCAB, (2, 13), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
@reaches("distributed")  # conversion starts a one-process gloo group
def converted(hf_llama, tmp_path_factory):
    model, src = hf_llama
    dst = tmp_path_factory.mktemp("nanotron") / "ckpt"
    summary = convert_hf_to_nanotron(src, dst)
    return model, dst, summary


def _transformers_logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(INPUT_IDS).logits


def test_logits_equal_transformers_at_tp1(converted):
    model, dst, summary = converted
    assert summary.dtype == torch.float32 and summary.rope_theta == 50000.0
    logits = nanotron_logits(dst, INPUT_IDS)
    torch.testing.assert_close(logits, _transformers_logits(model), atol=1e-4, rtol=0)


def _tp2_logits(folder, input_ids):
    import torch.distributed as dist

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint

    context = parallel_context(2, 1, 1)
    model, _ = load_nanotron_checkpoint(folder, context)
    model.eval()
    with torch.no_grad():
        shard = model.model(input_ids=input_ids, input_mask=torch.ones_like(input_ids, dtype=torch.bool))
    shards = [torch.empty_like(shard) for _ in range(dist.get_world_size(context.tp_pg))]
    dist.all_gather(shards, shard.contiguous(), group=context.tp_pg)
    return torch.cat(shards, dim=-1).transpose(0, 1)


def test_load_nanotron_checkpoint_applies_the_recorded_rope_theta(converted, tmp_path):
    """`nanotron_logits` loads with `load_nanotron_checkpoint`: the converted RoPE base (50000) gives
    transformers' logits; the same weights with Nanotron 0.4's default base (10000) do not."""
    model, dst, _ = converted
    expected = _transformers_logits(model)
    torch.testing.assert_close(nanotron_logits(dst, INPUT_IDS), expected, atol=1e-4, rtol=0)
    default_base = tmp_path / "default_rope"
    shutil.copytree(dst, default_base)
    fields = json.loads((default_base / "model_config.json").read_text())
    del fields["rope_theta"]
    (default_base / "model_config.json").write_text(json.dumps(fields))
    assert read_checkpoint_model(default_base).rope_theta == 10000.0
    off_by = (nanotron_logits(default_base, INPUT_IDS) - expected).abs().max()
    assert off_by > 5e-4  # tiny random weights: ~1.5e-3, well past the 1e-4 the right base matches to


def test_logits_equal_transformers_at_tp2(converted):
    model, dst, _ = converted
    per_rank = run_distributed(_tp2_logits, 2, dst, INPUT_IDS, timeout=120)
    expected = _transformers_logits(model)
    for logits in per_rank:
        torch.testing.assert_close(logits, expected, atol=1e-4, rtol=0)


def test_folder_is_a_nanotron_checkpoint(converted):
    model, dst, _ = converted
    from lighteval_nanotron.cpu import import_nanotron

    assert {p.name for p in dst.iterdir()} >= {"config.yaml", "model_config.json", "checkpoint_metadata.json", "model"}
    assert json.loads((dst / "checkpoint_metadata.json").read_text())["tp"] == 1
    checkpoint_model = read_checkpoint_model(dst)  # every other field is a LlamaConfig field
    assert checkpoint_model.rotary_layout == (50000.0, True)  # carried under 0.4, config fields under main
    assert yaml.safe_load((dst / "config.yaml").read_text())["model"]["model_config"]["rope_theta"] == 50000.0
    llama = checkpoint_model.model_config
    assert isinstance(llama, import_nanotron().LlamaConfig)
    assert (llama.num_key_value_heads, llama.tie_word_embeddings) == (2, model.config.tie_word_embeddings)
    qkv = next(dst.glob("model/model/decoder/0/pp_block/attn/qkv_proj/*.safetensors"))
    assert qkv.name == "model_weight_pp-rank-0-of-1_tp-rank-0-of-1.safetensors"
    with safe_open(qkv, "pt") as handle:
        assert handle.metadata()["unsharded_shape"] == "(128, 64)"
    lm_head_files = list(dst.glob("model/model/lm_head/**/*.safetensors"))
    assert len(lm_head_files) == (0 if model.config.tie_word_embeddings else 1)  # tied: saved once, as embedding


def test_reverse_conversion_gives_back_the_hf_weights(converted):
    model, dst, _ = converted
    hf_config, state_dict = nanotron_to_hf(dst)
    assert hf_config["rope_theta"] == 50000.0
    for name, tensor in model.state_dict().items():
        assert torch.equal(state_dict[name], tensor), name


@pytest.mark.distributed  # converts
def test_config_yaml_with_default_rope_theta_parses_as_nanotron_llama_config(tmp_path):
    from lighteval_nanotron.cpu import import_nanotron

    model = tiny_hf_llama(tie=True)
    model.config.rope_parameters["rope_theta"] = 10000.0
    model.save_pretrained(tmp_path / "hf")
    convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "nt")
    nanotron_config = import_nanotron()
    config = nanotron_config.get_config_from_file(str(tmp_path / "nt" / "config.yaml"))
    assert isinstance(config.model.model_config, nanotron_config.LlamaConfig)
    recorded = json.loads((tmp_path / "nt" / "model_config.json").read_text())
    # 0.4's LlamaConfig has no rope_theta (recorded only when not the default); current Nanotron's has the field
    assert ("rope_theta" in recorded) == ON_MAIN and recorded.get("rope_theta", 10000.0) == 10000.0


@pytest.mark.distributed  # converts
def test_sharded_bf16_source_and_dtype_override(tmp_path):
    model = tiny_hf_llama(tie=False).to(torch.bfloat16)
    model.save_pretrained(tmp_path / "hf", max_shard_size="40KB")
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file()
    (tmp_path / "hf" / "tokenizer.json").write_text("{}")
    summary = convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "bf16")
    assert summary.dtype == torch.bfloat16 and summary.tokenizer_saved
    assert (tmp_path / "bf16" / "tokenizer.json").is_file()
    _, weights = nanotron_to_hf(tmp_path / "bf16")
    assert weights["model.layers.1.mlp.up_proj.weight"].dtype == torch.bfloat16
    assert torch.equal(weights["lm_head.weight"], model.lm_head.weight)
    convert_hf_to_nanotron(tmp_path / "hf", tmp_path / "fp32", dtype="float32")
    assert nanotron_to_hf(tmp_path / "fp32")[1]["lm_head.weight"].dtype == torch.float32


def test_errors_name_the_problem(tmp_path, hf_llama):
    _, src = hf_llama
    with pytest.raises(CheckpointError, match="config.json"):
        convert_hf_to_nanotron(tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    )
    with pytest.raises(CheckpointError, match="Only Llama"):
        convert_hf_to_nanotron(tmp_path / "gpt2", tmp_path / "out")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "config.json").write_text((src / "config.json").read_text())
    (tmp_path / "bin" / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match="safe_serialization"):
        convert_hf_to_nanotron(tmp_path / "bin", tmp_path / "out")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not empty"):
        convert_hf_to_nanotron(src, tmp_path / "busy")
    with pytest.raises(CheckpointError, match="dtype"):
        convert_hf_to_nanotron(src, tmp_path / "out", dtype="int8")


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("tie_word_embeddings", "false", "tie_word_embeddings='false': give true or false"),  # tied: lm_head lost
        ("attention_bias", "false", "attention_bias='false': give true or false"),  # refused as `attention_bias: true`
        ("bos_token_id", True, "bos_token_id=True: give an integer or a list of integers or null"),  # was id 1
        ("num_attention_heads", "4", "num_attention_heads='4': give an integer"),
        ("rope_scaling", "linear", "rope_scaling='linear': give a mapping or null"),  # an AttributeError before
        ("rope_parameters", {"rope_type": "default", "rope_theta": "50000"}, "rope_theta='50000': give a number"),
    ],
)
def test_a_config_json_value_of_another_type_is_refused_before_mapping(tmp_path, hf_llama, key, value, words):
    """The mappings coerce with bool()/int()/float(): an untied model whose config says
    tie_word_embeddings "false" was converted as tied, its lm_head weights dropped, exit 0."""
    _, src = hf_llama
    folder = tmp_path / "src"
    shutil.copytree(src, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: value}))
    with pytest.raises(CheckpointError, match=re.escape(words)):
        convert_hf_to_nanotron(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()
