import gguf
import numpy as np
import pytest
import torch

from lighteval_nanotron.convert import convert_gguf_to_nanotron, nanotron_to_hf
from lighteval_nanotron.errors import CheckpointError
from tests.convert.tiny_llama import (
    TEXT,
    VOCAB,
    nanotron_logits,
    quantized_weights,
    tiny_hf_llama,
    tiny_tokenizer,
    write_tiny_gguf,
)

INPUT_IDS = torch.randint(0, VOCAB, (2, 13), generator=torch.Generator().manual_seed(2))


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.mark.distributed  # converts
@pytest.mark.parametrize("qtype", ["F32", "Q8_0", "Q4_1"])
@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_gguf_round_trip_matches_transformers_on_the_stored_weights(tmp_path, tokenizer, qtype, tie):
    model = tiny_hf_llama(tie=tie)
    write_tiny_gguf(tmp_path / "tiny.gguf", model, tokenizer, qtype)
    summary = convert_gguf_to_nanotron(tmp_path / "tiny.gguf", tmp_path / "nt")
    assert summary.rope_theta == 50000.0 and summary.tokenizer_saved

    expected_weights = quantized_weights(model, qtype)
    if tie:
        expected_weights["lm_head.weight"] = expected_weights["model.embed_tokens.weight"]
    _, weights = nanotron_to_hf(tmp_path / "nt")
    for name, tensor in expected_weights.items():
        assert torch.equal(weights[name], tensor), name  # dequantization and q/k un-permutation are exact

    model.load_state_dict(expected_weights)
    with torch.no_grad():
        expected = model(INPUT_IDS).logits
    torch.testing.assert_close(nanotron_logits(tmp_path / "nt", INPUT_IDS), expected, atol=1e-4, rtol=0)


@pytest.mark.distributed  # converts
def test_rebuilt_tokenizer_encodes_like_the_original(tmp_path, tokenizer):
    from transformers import AutoTokenizer

    write_tiny_gguf(tmp_path / "tiny.gguf", tiny_hf_llama(tie=True), tokenizer, "F32")
    convert_gguf_to_nanotron(tmp_path / "tiny.gguf", tmp_path / "nt")
    rebuilt = AutoTokenizer.from_pretrained(tmp_path / "nt")
    texts = TEXT[:3] + ["Digits 12345 and  spaces\tand\nnewlines", "<|im_start|>user\nhi 42<|im_end|>"]
    for text in texts:
        ids = rebuilt(text)["input_ids"]
        assert ids == tokenizer.encode(text).ids
        assert rebuilt.decode(ids) == text
    assert rebuilt("1999")["input_ids"] == [tokenizer.token_to_id(d) for d in "1999"]
    assert (rebuilt.bos_token, rebuilt.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert rebuilt("<|im_end|>")["input_ids"] == [2]  # control tokens stay whole


def test_rejects_unsupported_quantization_architecture_and_pre_tokenizer(tmp_path, tokenizer):
    model = tiny_hf_llama(tie=True)
    path = tmp_path / "q8_1.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_1]
    raw = np.zeros((VOCAB, 64 // block_elements * block_bytes), dtype=np.uint8)
    writer.add_tensor("token_embd.weight", raw, raw_dtype=gguf.GGMLQuantizationType.Q8_1)
    for key, value in [("embedding_length", 64), ("attention.head_count", 4), ("feed_forward_length", 96),
                       ("block_count", 1), ("vocab_size", VOCAB)]:  # fmt: skip
        writer.add_uint32(f"llama.{key}", value)
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    with pytest.raises(CheckpointError, match=r"\['Q8_1'\] cannot be dequantized"):
        convert_gguf_to_nanotron(path, tmp_path / "out")

    path = tmp_path / "gpt2.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    with pytest.raises(CheckpointError, match="'gpt2' is not supported"):
        convert_gguf_to_nanotron(path, tmp_path / "out")

    write_tiny_gguf(tmp_path / "qwen.gguf", model, tokenizer, "F32", pre="qwen2")
    with pytest.raises(CheckpointError, match="pre-tokenizer 'qwen2'"):
        convert_gguf_to_nanotron(tmp_path / "qwen.gguf", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written before the checks

    with pytest.raises(CheckpointError, match="not found"):
        convert_gguf_to_nanotron(tmp_path / "missing.gguf", tmp_path / "out")
