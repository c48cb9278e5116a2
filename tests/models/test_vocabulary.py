"""The tokenizer is checked against the model's vocabulary before any forward, on every rank: a
tokenizer larger than the model, an id outside the vocabulary in a prompt or a choice, a target no
vocabulary shard owns, a generated id the tokenizer cannot decode. Real tiny Llama (vocab 1024)
at TP1 and TP2 on gloo."""

from __future__ import annotations

import json

import pytest
import torch

from lighteval_nanotron.errors import ConfigError, EvaluationError
from lighteval_nanotron.models.engine.vocabulary import check_tokenizer_fits, tokenizer_size
from lighteval_nanotron.parallel.vocab_parallel import target_logprobs
from lighteval_nanotron.requests import Doc
from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import EOS_TOKEN, VOCAB_SIZE, _tokenizer_json, tiny_tokenizer

EXTRA = "<|extra|>"  # an added token: id 1024, one past the model's vocabulary
SMALL = 512  # ids of the cut tokenizer: the model's rows 512..1023 are unknown to it


def _bigger_tokenizer():
    tokenizer = tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": [EXTRA]})
    return tokenizer


def _small_tokenizer():
    """The tiny BPE cut to its first 511 tokens plus EOS (id 511)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    data = json.loads(_tokenizer_json())
    vocab = {token: index for token, index in data["model"]["vocab"].items() if index < SMALL - 1}
    vocab[EOS_TOKEN] = SMALL - 1
    data["model"]["vocab"] = vocab
    data["model"]["merges"] = [
        m for m in data["model"]["merges"] if "".join(m if isinstance(m, list) else m.split(" ")) in vocab
    ]
    data["added_tokens"] = [{**token, "id": SMALL - 1} for token in data["added_tokens"]]
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(data)), bos_token=EOS_TOKEN, eos_token=EOS_TOKEN
    )


class _OpaqueTokenizer:
    """A tokenizer that does not say its size (a user's own class): only the engine's per-id check sees
    that it produces id 1024."""

    def __init__(self) -> None:
        self._inner = _bigger_tokenizer()
        self.bos_token_id = self.eos_token_id = VOCAB_SIZE - 1

    def convert_tokens_to_ids(self, token: str) -> int:
        return self._inner.convert_tokens_to_ids(token)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._inner.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._inner.decode(ids, skip_special_tokens=skip_special_tokens)


def test_tokenizer_size_counts_added_tokens_and_special_ids_are_checked():
    assert tokenizer_size(tiny_tokenizer()) == VOCAB_SIZE
    assert tokenizer_size(_bigger_tokenizer()) == VOCAB_SIZE + 1
    assert tokenizer_size(_bigger_tokenizer().backend_tokenizer) == VOCAB_SIZE + 1  # a bare tokenizers.Tokenizer
    assert tokenizer_size(_small_tokenizer()) == SMALL
    check_tokenizer_fits(tiny_tokenizer(), {"EOS": VOCAB_SIZE - 1}, VOCAB_SIZE)
    with pytest.raises(ConfigError, match=r"1025 token ids .*1024 .*vocab_size .*1025"):
        check_tokenizer_fits(_bigger_tokenizer(), {}, VOCAB_SIZE)
    with pytest.raises(ConfigError, match=r"EOS 1024 .*vocabulary of 1000"):
        check_tokenizer_fits(_small_tokenizer(), {"BOS": 511, "EOS": 1024}, 1000)


def _targets_outside(tp: int) -> list[str]:
    """Rank function: a target past the vocabulary and a negative one, on this rank's shard."""
    import torch.distributed as dist

    from tests.helpers.distributed import parallel_context

    group = parallel_context(tp, 1, 1).tp_pg if tp > 1 else None
    logits = torch.randn(3, 8 // tp)
    messages = []
    for bad in (8, -1):
        with pytest.raises(EvaluationError) as caught:
            target_logprobs(logits, torch.tensor([1, bad, 2]), group)
        messages.append(str(caught.value))
    if tp > 1:
        dist.barrier(group)  # the group is still usable: every rank refused before any collective
    return messages


def test_a_target_no_shard_owns_is_refused_at_tp1_and_tp2():
    assert "token id 8 is outside the vocabulary of 8 ids" in _targets_outside(1)[0]
    for first, negative in run_distributed(_targets_outside, 2, 2, timeout=60):
        assert "token id 8 is outside the vocabulary of 8 ids" in first and "token id -1" in negative


def _engine_outcomes(checkpoint: str, tp: int) -> dict:
    """Rank function at TP `tp`: what building and preparing the engine gives with each tokenizer."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from tests.helpers.distributed import parallel_context

    context = parallel_context(tp, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    config = EngineConfig(max_length=48, gather_to="all")
    outcomes: dict = {}
    try:
        NanotronLightevalModel(model, context, _bigger_tokenizer(), config)
    except ConfigError as error:
        outcomes["bigger"] = str(error)
    engine = NanotronLightevalModel(model, context, _OpaqueTokenizer(), config)
    in_query = Doc(
        query=f"Pick {EXTRA}:", choices=[" a", " b"], gold_index=0, task_name="t|q|0", id="3", generation_size=2
    )
    in_choice = Doc(query="Pick:", choices=[" a", EXTRA], gold_index=0, task_name="t|c|0", id="4")
    for name, prepare, doc in (
        ("query", engine.prepare_loglikelihood, in_query),
        ("choice", engine.prepare_loglikelihood, in_choice),
        ("rolling", engine.prepare_rolling, in_query),
        ("generation", engine.prepare_generation, in_query),
    ):
        try:
            prepare([doc])
        except ConfigError as error:
            outcomes[name] = str(error)
    small = NanotronLightevalModel(model, context, _small_tokenizer(), config)
    docs = [Doc(query=f"Text {k}: once upon a time", choices=[], gold_index=0, generation_size=6) for k in range(6)]
    outcomes["generated"] = [(r.output_tokens[0], r.unknown_tokens, r.text[0]) for r in small.greedy_until(docs)]
    return outcomes


def test_vocabulary_checked_at_setup_on_every_rank_and_unknown_generated_ids_flagged(tiny_checkpoint):
    single = run_distributed(_engine_outcomes, 1, str(tiny_checkpoint), 1, timeout=120)[0]
    ranks = run_distributed(_engine_outcomes, 2, str(tiny_checkpoint), 2, timeout=180)
    for outcome in [single, *ranks]:
        assert "has 1025 token ids (0..1024) but the model's vocabulary has 1024" in outcome["bigger"]
        assert outcome["query"].startswith("task t|q|0, doc '3': token id 1024 is outside the model's vocabulary")
        assert outcome["choice"].startswith("task t|c|0, doc '4': token id 1024")
        assert outcome["rolling"].startswith("task t|q|0, doc '3': token id 1024")
        assert outcome["generation"].startswith("task t|q|0, doc '3': token id 1024")
        generated = outcome["generated"]
        assert any(unknown for _, unknown, _ in generated), generated  # a random model picks rows 512..1023 too
        for tokens, unknown, _ in generated:
            assert unknown == [t for t in tokens if t >= SMALL]
    assert ranks[0]["generated"] == ranks[1]["generated"] == single["generated"]  # TP2 gives TP1's tokens
