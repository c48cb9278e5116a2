"""Held-out loss on the live model equals Nanotron's own forward, at every layout."""

import pytest

from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import VOCAB_SIZE
from tests.models.held_out_cases import held_out_run, write_text_jsonl

SEQUENCE_LENGTH = 64
TOKENS = 12 * SEQUENCE_LENGTH


@pytest.fixture(scope="module")
def text_source(tmp_path_factory):
    return write_text_jsonl(tmp_path_factory.mktemp("held_out") / "web.jsonl")


@pytest.fixture(scope="module")
def tp1(tiny_checkpoint, text_source):
    return run_distributed(
        held_out_run, 1, str(tiny_checkpoint), str(text_source), 1, 1, 1, SEQUENCE_LENGTH, TOKENS, {}, timeout=180
    )[0]


def _relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_tp1_equals_nanotron_training_forward(tp1):
    assert len(tp1["nll"]) == TOKENS // SEQUENCE_LENGTH
    for got, want in zip(tp1["nll"], tp1["reference"], strict=True):
        assert _relative(got, want) < 1e-5
    assert _relative(sum(tp1["nll"]), sum(tp1["reference"])) < 1e-5


@pytest.mark.parametrize("layout", [(2, 2, 1), (1, 1, 2), (2, 1, 1), (1, 2, 1)], ids=["tp2xpp2", "dp2", "tp2", "pp2"])
def test_layouts_equal_nanotron_forward_at_tp1(tiny_checkpoint, text_source, tp1, layout):
    tp, pp, dp = layout
    results = run_distributed(
        held_out_run,
        tp * pp * dp,
        str(tiny_checkpoint),
        str(text_source),
        tp,
        pp,
        dp,
        SEQUENCE_LENGTH,
        TOKENS,
        {"tokens_per_batch": 2 * SEQUENCE_LENGTH},
        timeout=240,
    )
    for result in results:
        assert result["windows"] == tp1["windows"]
        for got, want in zip(result["nll"], tp1["reference"], strict=True):
            assert _relative(got, want) < 1e-5
        assert result["max_logits_width"] <= VOCAB_SIZE // tp
    if pp > 1:
        assert max(r["batches"] for r in results) >= pp  # several micro-batches in flight
