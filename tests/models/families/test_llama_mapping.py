import pytest
import torch

from lighteval_nanotron.errors import CheckpointError
from lighteval_nanotron.models.families.llama.conversion import (
    NT_EMBED,
    NT_LM_HEAD,
    LlamaShape,
    deinterleave_rotary,
    hf_config_from_nanotron,
    hf_to_nanotron_state_dict,
    interleave_rotary,
    nanotron_config_from_hf,
    nanotron_to_hf_state_dict,
)
from tests.convert.tiny_llama import tiny_hf_llama

HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def test_interleave_puts_half_pairs_side_by_side_and_inverts():
    head_dim, heads = 8, 2
    weight = torch.arange(heads * head_dim, dtype=torch.float32)[:, None].repeat(1, 3)
    nanotron = interleave_rotary(weight, heads)
    # head 0: HF rows (0, 4), (1, 5), ... become adjacent pairs
    assert nanotron[:8, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert nanotron[8:, 0].tolist() == [8, 12, 9, 13, 10, 14, 11, 15]
    assert torch.equal(deinterleave_rotary(nanotron, heads), weight)


@pytest.mark.parametrize("tie", [True, False])
def test_state_dict_round_trip_is_exact(tie):
    model = tiny_hf_llama(tie=tie)
    hf = model.state_dict()
    config, _ = nanotron_config_from_hf(model.config.to_dict())
    shape = LlamaShape.from_nanotron_config(config)
    nanotron = hf_to_nanotron_state_dict(hf, shape)
    assert nanotron["model.decoder.0.pp_block.attn.qkv_proj.weight"].shape == (64 + 2 * 32, 64)
    assert nanotron["model.decoder.1.pp_block.mlp.gate_up_proj.weight"].shape == (2 * 96, 64)
    assert (nanotron[NT_LM_HEAD] is nanotron[NT_EMBED]) == tie
    back = nanotron_to_hf_state_dict(nanotron, shape)
    assert set(back) == set(hf) | {"lm_head.weight"}
    for name, tensor in hf.items():
        assert torch.equal(back[name], tensor), name


def test_config_mapping_reads_rope_theta_in_both_spellings_and_first_eos():
    config, theta = nanotron_config_from_hf(
        {**HF_CONFIG, "rope_parameters": {"rope_theta": 5e5, "rope_type": "default"}}
    )
    assert theta == 5e5
    assert config["num_key_value_heads"] == 2 and config["tie_word_embeddings"] is True
    _, theta = nanotron_config_from_hf({**HF_CONFIG, "rope_theta": 1e6})
    assert theta == 1e6
    config, theta = nanotron_config_from_hf({**HF_CONFIG, "eos_token_id": [7, 8]})
    assert theta == 10000.0 and config["eos_token_id"] == 7
    hf_back = hf_config_from_nanotron(config, 1e6)
    assert hf_back["rope_theta"] == 1e6 and hf_back["num_key_value_heads"] == 2


@pytest.mark.parametrize(
    "override, message",
    [
        ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, "Only Llama"),
        ({"attention_bias": True}, "no biases"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "RoPE scaling"),
        ({"head_dim": 32}, "head_dim"),
    ],
)
def test_config_mapping_rejects_what_nanotron_cannot_represent(override, message):
    with pytest.raises(CheckpointError, match=message):
        nanotron_config_from_hf({**HF_CONFIG, **override})
