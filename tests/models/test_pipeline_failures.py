"""A failure on the output stage in the middle of a pipelined run ends the run on every rank at
once, with one agreed error, and leaves nothing in flight (the next run gives the right answers);
logits that overflow are reported per doc, at every placement, never as an IndexError."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import make_tiny_checkpoint
from tests.models.failure_cases import FAILURE, OUT_OF_MEMORY, fail_on_output_stage, overflowing_logits
from tests.models.held_out_cases import write_text_jsonl


def _assert_same_answers(got: list, want: list) -> None:
    """Generated tokens equal; log-probs (held-out NLL sums) within 1e-4 (TP ranks add in another
    order) and greedy flags equal."""
    for mine, theirs in zip(got, want, strict=True):
        if isinstance(theirs, tuple):
            assert mine[0] == pytest.approx(theirs[0], abs=1e-4) and mine[1] == theirs[1]
        else:
            assert mine == theirs


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory) -> Path:
    """Nanotron puts everything but the fp32 cast on stage 0 of this model at PP2 (as SmolLM2's
    vocabulary does with 2 layers): the activations after the final norm cross the boundary."""
    folder = tmp_path_factory.getbasetemp() / "placement_two_layers"
    return make_tiny_checkpoint(folder, num_hidden_layers=2, intermediate_size=32)


@pytest.fixture(scope="module")
def text_source(tmp_path_factory) -> str:
    return str(write_text_jsonl(tmp_path_factory.mktemp("held_out") / "web.jsonl"))


@pytest.fixture(scope="module")
def answers(two_layers, text_source) -> dict[str, list]:
    return {
        kind: run_distributed(fail_on_output_stage, 1, str(two_layers), 1, 1, kind, 0, text_source, timeout=60)[0][
            "again"
        ]
        for kind in ("generation", "loglikelihood", "held_out")
    }


@pytest.mark.parametrize(
    "kind, layout, fail_at",
    [
        ("generation", (1, 2), 3),
        ("generation", (2, 2), 5),
        ("generation", (1, 1), 2),
        ("loglikelihood", (1, 2), 2),
        ("loglikelihood", (2, 2), 1),
        ("held_out", (1, 2), 2),
    ],
    ids=lambda value: "tp{}-pp{}".format(*value) if isinstance(value, tuple) else str(value),
)
def test_a_failing_output_stage_stops_every_rank_together(two_layers, text_source, answers, kind, layout, fail_at):
    tp, pp = layout
    results = run_distributed(
        fail_on_output_stage, tp * pp, str(two_layers), tp, pp, kind, fail_at, text_source, timeout=60
    )
    messages = {result["raised"] for result in results}
    assert len(messages) == 1  # the same error on every rank, not a timeout on the ranks that waited
    ((name, message),) = messages
    assert name == "EvaluationError" and FAILURE in message and "world rank" in message
    assert all(result["seconds"] < 20 for result in results)  # the failure timeout is 30 s
    for result in results:  # no activation or feedback of the failed run was left in flight
        _assert_same_answers(result["again"], answers[kind])


@pytest.mark.parametrize("kind", ["generation", "loglikelihood", "held_out"])
def test_an_out_of_memory_on_the_output_stage_is_retried_on_every_rank(two_layers, text_source, answers, kind):
    """At PP2 the output stage runs out of memory in the 2nd micro-batch: every rank drops the run
    and runs it again with smaller micro-batches; the answers are those of a run without failure."""
    results = run_distributed(
        fail_on_output_stage, 2, str(two_layers), 1, 2, kind, 2, text_source, OUT_OF_MEMORY, timeout=60
    )
    for result in results:
        assert result["raised"] is None
        _assert_same_answers(result["first"], answers[kind])


def test_three_stages_stop_together(tmp_path_factory):
    checkpoint = make_tiny_checkpoint(tmp_path_factory.getbasetemp() / "placement_three_layers", num_hidden_layers=3)
    for kind in ("generation", "loglikelihood"):
        results = run_distributed(fail_on_output_stage, 3, str(checkpoint), 1, 3, kind, 2, timeout=60)
        assert len({result["raised"] for result in results}) == 1 and FAILURE in results[0]["raised"][1]
        assert all(result["seconds"] < 20 for result in results)
        one = run_distributed(fail_on_output_stage, 1, str(checkpoint), 1, 1, kind, 0, timeout=60)[0]
        for result in results:
            _assert_same_answers(result["again"], one["again"])


def test_overflowing_logits_are_flagged_per_doc_at_every_layout(two_layers):
    """NaN logits: every doc flagged, every log-prob NaN, the same tokens at TP1, PP2 and TP2xPP2
    (a row's first NaN; at TP2 the vocabulary-parallel argmax used to return a cast infinity, which
    the tokenizer could not decode)."""
    tp1 = run_distributed(overflowing_logits, 1, str(two_layers), 1, 1, timeout=60)[0]
    for tp, pp in ((1, 2), (2, 2)):
        for result in run_distributed(overflowing_logits, tp * pp, str(two_layers), tp, pp, timeout=60) + [tp1]:
            assert all(response.non_finite_logits for response in result["generation"])
            assert [r.output_tokens for r in result["generation"]] == [r.output_tokens for r in tp1["generation"]]
            for response in result["loglikelihood"] + result["rolling"]:
                assert not any(math.isfinite(value) for value in response.logprobs)
