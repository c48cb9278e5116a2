"""The engine gives the same answers at every layout, with every switch, as a plain reference."""

from __future__ import annotations

import pytest
import torch

from lighteval_nanotron.models.engine import EngineConfig
from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter, encode_pair, score_window
from lighteval_nanotron.tasks.prompt_manager import PromptManager
from tests.helpers.distributed import LAYOUTS, DistributedRunError, run_distributed
from tests.helpers.reference import reference_logits
from tests.helpers.tiny_model import VOCAB_SIZE, tiny_tokenizer
from tests.models.engine_cases import (
    MAX_LENGTH,
    assert_same,
    engine_docs,
    evaluate,
    evaluate_with_failing_rank,
    run_engine,
)

TOLERANCE = 1e-4


_run = run_engine


@pytest.mark.parametrize("layout", LAYOUTS[1:], ids=lambda layout: "tp{}-pp{}-dp{}".format(*layout))
def test_layout_matches_tp1_pp1(tiny_checkpoint, baseline, layout):
    results = _run(tiny_checkpoint, *layout)
    for rank_result in results:  # gather_to="all": every rank holds every response
        assert_same(rank_result, baseline)


ALL_OFF = {switch: False for switch in EngineConfig.SWITCHES}


@pytest.mark.parametrize("switch", EngineConfig.SWITCHES)
def test_each_switch_off_gives_identical_results(tiny_checkpoint, baseline, switch):
    results = _run(tiny_checkpoint, 2, 2, 1, **{switch: False}, tokens_per_batch=96, micro_batches_in_flight=1)
    assert_same(results[0], baseline)


@pytest.mark.parametrize("layout", [(2, 1, 1), (1, 2, 1)], ids=["tp2", "pp2"])
def test_all_switches_off_gives_identical_results(tiny_checkpoint, baseline, layout):
    results = _run(tiny_checkpoint, *layout, **ALL_OFF)
    assert_same(results[-1], baseline)


def test_small_packed_rows_and_shared_context_alone_give_identical_results(tiny_checkpoint, baseline):
    assert_same(_run(tiny_checkpoint, 1, 2, 1, pack_width=16, tokens_per_batch=64)[-1], baseline)
    assert_same(_run(tiny_checkpoint, 2, 1, 1, pack_rows=False)[0], baseline)


def test_shared_rows_process_fewer_tokens_than_one_row_per_choice(tiny_checkpoint, baseline):
    off = _run(tiny_checkpoint, 1, 1, 1, **ALL_OFF)[0]["plan_stats"]
    on = baseline["plan_stats"]
    assert on.useful_tokens == off.useful_tokens
    assert on.processed_tokens < off.processed_tokens and on.padding_tokens < off.padding_tokens
    assert on.logit_positions < on.processed_tokens and off.logit_positions == off.processed_tokens
    # no padding, few-shot prefix shared across docs; left-truncated windows of the long doc differ per choice
    assert on.padding_tokens == 0 and on.processed_tokens <= 1.1 * on.useful_tokens


def test_no_rank_handles_full_vocabulary_logits(tiny_checkpoint):
    results = _run(tiny_checkpoint, 2, 1, 1)
    for rank_result in results:
        assert rank_result["logits_tensors"] > 0
        assert rank_result["max_logits_width"] == VOCAB_SIZE // 2


def test_gather_to_reporting_rank_only(tiny_checkpoint, baseline):
    results = _run(tiny_checkpoint, 1, 2, 1, gather_to="reporting")
    reporting = [r for r in results if r["reporting"]]
    assert len(reporting) == 1 and results.index(reporting[0]) == 1  # DP0/TP0 of the output stage
    assert_same(reporting[0], baseline)
    assert all(r["loglikelihood"] == [] for r in results if not r["reporting"])


def test_dp2_gathers_only_what_each_replica_computed_to_the_reporting_rank(tiny_checkpoint, baseline):
    results = _run(tiny_checkpoint, 1, 1, 2, gather_to="reporting")
    (reporting,) = [r for r in results if r["reporting"]]
    assert results.index(reporting) == 0 and results[1]["loglikelihood"] == []
    assert_same(reporting, baseline)
    sizes = [r["loglikelihood_gather"].payload_sizes[0] for r in results]
    dense = results[0]["dense_payload_bytes"]
    assert all(size < 0.75 * dense for size in sizes), (sizes, dense)  # each replica: its own slots only
    assert reporting["loglikelihood_gather"].received == sizes[1]  # one payload travelled, to one rank
    assert results[1]["loglikelihood_gather"].received == 0


def test_engine_config_gathers_to_the_reporting_rank_by_default():
    assert EngineConfig().gather_to == "reporting"


def test_a_failing_rank_fails_the_run_without_hanging(tiny_checkpoint):
    with pytest.raises(DistributedRunError, match="prompt function failed on purpose"):
        run_distributed(evaluate_with_failing_rank, 2, str(tiny_checkpoint), 1, 2, 1, timeout=60)


def _reference_logprobs(checkpoint, context: list[int], continuation: list[int]) -> tuple[float, bool]:
    window, _ = score_window(context, continuation, MAX_LENGTH)
    logits = reference_logits(checkpoint, torch.tensor([window.input_ids])).double().log_softmax(-1)[0]
    positions = range(window.start, window.start + len(window.targets))
    picked = [logits[p, t].item() for p, t in zip(positions, window.targets)]
    greedy = all(logits[p].argmax().item() == t for p, t in zip(positions, window.targets))
    return sum(picked), greedy


def test_tp1_matches_plain_pytorch_reference(tiny_checkpoint, baseline):
    tok = TokenizerAdapter(tiny_tokenizer())
    prompt = PromptManager().prepare_prompt
    for doc, response in zip(engine_docs(), baseline["loglikelihood"], strict=True):
        for i, choice in enumerate(doc.choices):
            context, continuation = encode_pair(tok, prompt(doc), choice, True, False)
            logprob, greedy = _reference_logprobs(tiny_checkpoint, context, continuation)
            assert response.logprobs[i] == pytest.approx(logprob, abs=TOLERANCE)
            assert response.argmax_logits_eq_gold[i] == greedy
            if doc.unconditioned_query is not None:
                context, continuation = encode_pair(tok, doc.unconditioned_query, choice, True, False)
                assert response.unconditioned_logprobs[i] == pytest.approx(
                    _reference_logprobs(tiny_checkpoint, context, continuation)[0], abs=TOLERANCE
                )


def test_rolling_matches_reference_when_the_text_fits(tiny_checkpoint, baseline):
    tok = TokenizerAdapter(tiny_tokenizer())
    doc = engine_docs()[0]
    tokens = tok.encode(PromptManager().prepare_prompt(doc), add_special_tokens=False)
    assert len(tokens) < MAX_LENGTH
    logprob, _ = _reference_logprobs(tiny_checkpoint, [tok.prefix_token_id], tokens)
    assert baseline["rolling"][0].logprobs == pytest.approx([logprob], abs=TOLERANCE)
    assert baseline["rolling"][0].output_tokens == [tokens]


def test_greedy_generation_matches_reference(tiny_checkpoint, baseline):
    tok = TokenizerAdapter(tiny_tokenizer())
    for doc, response in zip(engine_docs(), baseline["generation"], strict=True):
        ids = tok.encode(PromptManager().prepare_prompt(doc), add_special_tokens=True)
        ids = ids[max(0, len(ids) - (MAX_LENGTH - doc.generation_size)) :]
        generated: list[int] = []
        while len(generated) < doc.generation_size:
            token = reference_logits(tiny_checkpoint, torch.tensor([ids + generated]))[0, -1].argmax().item()
            if token == tok.eos_token_id:
                break
            generated.append(token)
            if any(stop in tok.decode(generated) for stop in doc.stop_sequences or []):
                break
        assert response.output_tokens == [generated]
        text = tok.decode(generated)
        for stop in doc.stop_sequences or []:
            text = text.split(stop)[0] if stop in text else text
        assert response.text == [text]


def test_long_doc_is_truncated_and_counted(baseline):
    long_doc = 3
    assert baseline["loglikelihood"][long_doc].truncated_tokens_count > 0
    assert baseline["generation"][long_doc].truncated_tokens_count > 0
    assert all(r.truncated_tokens_count == 0 for i, r in enumerate(baseline["loglikelihood"]) if i != long_doc)
    assert len(baseline["rolling"][long_doc].output_tokens[0]) > MAX_LENGTH  # scored with sliding windows


def test_generation_stops_early_and_drops_finished_rows(tiny_checkpoint, baseline):
    """Rows leave the batch when done: after the prefill, exactly one position per token fed."""
    tok = TokenizerAdapter(tiny_tokenizer())
    contexts = [len(r.input_tokens) for r in baseline["generation"]]
    fed = sum(max(0, len(r.output_tokens[0]) - 1) for r in baseline["generation"])
    stats = baseline["generation_stats"]
    assert stats.processed_tokens - stats.padding_tokens == sum(contexts) + fed
    assert stats.useful_tokens == sum(contexts) + fed
    longest = max(len(r.output_tokens[0]) for r in baseline["generation"])
    assert longest > 1 and stats.decode_steps >= longest - 1  # decode steps counted (the benchmark's roofline)
    assert stats.decode_cache_positions >= stats.decode_steps and stats.decode_seconds > 0
    kept = _run(tiny_checkpoint, 1, 1, 1, drop_finished_rows=False, max_rows_per_batch=8)[0]["generation_stats"]
    assert kept.processed_tokens > stats.processed_tokens
    sizes = [d.generation_size for d in engine_docs()]
    assert any(len(r.output_tokens[0]) < size for r, size in zip(baseline["generation"], sizes))
    assert tok.eos_token_id is not None


def test_a_small_pool_starts_waiting_rows_as_running_rows_finish(tiny_checkpoint, baseline):
    """Two slots for eight docs: rows start in several prefills as others leave; same generations."""
    small = _run(tiny_checkpoint, 1, 1, 1, max_rows_per_batch=2)[0]
    assert_same(small, baseline)
    stats, all_at_once = small["generation_stats"], baseline["generation_stats"]
    assert all_at_once.batches == 1 and stats.batches >= len(engine_docs()) // 2
    assert stats.processed_tokens - stats.padding_tokens == all_at_once.processed_tokens - all_at_once.padding_tokens
