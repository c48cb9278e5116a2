"""The incremental stop check finds a stop sequence exactly when a full decode would."""

from __future__ import annotations

import random
from types import SimpleNamespace

from lighteval_nanotron.models.engine.generation import _stopped
from lighteval_nanotron.models.engine.generation_plan import GenRequest
from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer


def test_incremental_stop_check_matches_a_full_decode():
    tok = TokenizerAdapter(tiny_tokenizer())
    runtime = SimpleNamespace(tok=tok, max_length=10_000)
    rng = random.Random(0)
    stops = ("Question:", "\n\n", "the")
    request = GenRequest(0, "", (1,), 5_000, stops, 0)
    for _ in range(20):
        tokens: list[int] = []
        while True:
            tokens.append(rng.randrange(VOCAB_SIZE - 1))
            full = any(stop in tok.decode(tokens) for stop in stops)
            assert _stopped(runtime, request, tokens) == full
            if full or len(tokens) > 300:
                break
