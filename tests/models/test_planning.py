"""Pure planning pieces of the engine: tokenization boundaries, windows, DP split, batches."""

from __future__ import annotations

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.engine.batching import cut_batches
from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.data import token_balanced_owners
from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter, encode_pair, rolling_windows, score_window
from tests.helpers.tiny_model import tiny_tokenizer


@pytest.fixture(scope="module")
def tok() -> TokenizerAdapter:
    return TokenizerAdapter(tiny_tokenizer())


def test_trailing_space_moves_to_the_continuation(tok):
    context, continuation = encode_pair(tok, "Answer: ", "yes", add_special_tokens=True, pairwise=False)
    assert tok.decode(context) == "Answer:" and tok.decode(continuation) == " yes"
    assert context + continuation == tok.encode("Answer: yes", add_special_tokens=True)


def test_pairwise_and_empty_context(tok):
    context, continuation = encode_pair(tok, "Q:", " a b", True, pairwise=True)
    assert continuation == tok.encode(" a b", add_special_tokens=False)
    assert encode_pair(tok, "", " a", True, False)[0] == [tok.prefix_token_id]


def test_score_window_truncates_from_the_left():
    window, cut = score_window(list(range(10)), [100, 101], max_length=5)
    assert window.input_ids == (6, 7, 8, 9, 100) and cut == 6
    assert window.targets == (100, 101) and window.start == 3  # logits at 9 and 100 predict them
    assert score_window([1], [2], 8)[1] == 0


@pytest.mark.parametrize("n, max_length, stride", [(1, 4, 2), (10, 4, 2), (11, 4, 4), (30, 8, 3)])
def test_rolling_windows_score_each_token_once_with_enough_context(n, max_length, stride):
    tokens = list(range(100, 100 + n))
    windows = rolling_windows(tokens, prefix=7, max_length=max_length, stride=stride)
    scored = [t for w in windows for t in w.targets]
    assert scored == tokens
    full = [7, *tokens]
    for w in windows:
        assert len(w.input_ids) <= max_length
        for k, target in enumerate(w.targets):
            position = w.start + k
            assert full[full.index(target) - 1] == w.input_ids[position]  # predicts the next token
    for w in windows[1:]:
        assert w.start >= max_length - stride  # every later target sees >= max_length - stride tokens


def test_replica_assignment_is_balanced_and_deterministic():
    lengths = [50, 10, 40, 30, 20, 20, 10]
    owner = token_balanced_owners(lengths, 2)
    assert owner == token_balanced_owners(lengths, 2)
    loads = [sum(length for length, o in zip(lengths, owner) if o == r) for r in range(2)]
    assert abs(loads[0] - loads[1]) <= 10


def test_cut_batches_respects_the_token_budget():
    batches = cut_batches([8, 8, 6, 4, 4, 2, 2, 2], cost=lambda x: x, max_tokens=16, max_rows=3, fixed_width=None)
    assert batches == [[8, 8], [6, 4], [4, 2, 2], [2]]
    for batch in batches:
        assert len(batch) * max(batch) <= 16
    assert cut_batches([20, 1], lambda x: x, 16, 8, None) == [[20], [1]]


def test_engine_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="tokens_per_batch"):
        EngineConfig(tokens_per_batch=0)
    with pytest.raises(ConfigError, match="gather_to"):
        EngineConfig(gather_to="rank0")
    with pytest.raises(ConfigError, match="rolling_stride"):
        EngineConfig(rolling_stride=64).stride_for(32)


def _path(row, node):
    tokens = []
    while True:
        tokens.append(row.input_ids[node])
        if row.parents[node] == node:
            return tokens[::-1]
        node = row.parents[node]


@pytest.mark.parametrize("share", [True, False])
def test_packed_prefix_trees_keep_every_sequence_and_share_prefixes(share):
    from lighteval_nanotron.models.engine.packing import ScoredSequence, packed_rows

    prefix = (1, 2, 3, 4)
    sequences = [ScoredSequence(prefix + (10 + i, 20 + i), (3, 4), (10 + i, 20 + i), (i, i), i // 2) for i in range(6)]
    sequences.append(ScoredSequence((9, 8, 7), (2,), (6,), (6,), 3))
    groups = packed_rows(sequences, width=12, share=share, parts=2)
    rows = [row for group in groups for row in group]
    assert all(groups) and all(len(row.input_ids) <= 12 for row in rows)
    seen = {}
    for row in rows:
        for node, target, slot in zip(row.positions, row.targets, row.slots):
            seen.setdefault(slot, []).append((tuple(_path(row, node)), target))
            assert row.depths[node] == len(_path(row, node)) - 1
    for sequence in sequences:
        assert seen[sequence.slots[0]][-len(sequence.targets) :] == [
            (sequence.input_ids[: p + 1], t) for p, t in zip(sequence.positions, sequence.targets)
        ]
    total = sum(len(row.input_ids) for row in rows)
    assert total < sum(s.token_length for s in sequences) if share else total == sum(s.token_length for s in sequences)


@pytest.mark.parametrize("pack_rows, shared_context, dp", [(True, True, 1), (True, True, 2), (False, False, 1)])
def test_per_doc_token_positions_add_up_to_the_plans(tok, pack_rows, shared_context, dp):
    """Each doc's share of the rows (packed, prefixes shared, padding) sums to the plan's count."""
    from lighteval_nanotron.models.engine.scoring_plan import build_batches, loglikelihood_rows
    from lighteval_nanotron.tasks import Doc

    cfg = EngineConfig(max_length=64, pack_rows=pack_rows, shared_context=shared_context, pack_width=48)
    fewshot = "Q: one two three four five six seven\nA: yes\n"
    docs = [Doc(f"{fewshot}Q: item {i} {'x ' * i}\nA:", [" yes", " no", " maybe so"], 0) for i in range(7)]
    docs += [Doc(f"Other {i}:", [" a", " b"], 1) for i in range(3)]
    rows, specs, _, useful = loglikelihood_rows(docs, tok, lambda d: d.query, cfg, 64, unconditioned=False)
    _, stats, _ = build_batches(rows, specs, cfg, dp, 0, pad_multiple=8, pad_id=0)
    per_doc = [spec.processed_tokens for spec in specs]
    assert sum(per_doc) == pytest.approx(stats.processed_tokens, rel=1e-12)
    assert sum(spec.useful_tokens for spec in specs) == useful
    assert all(tokens > 0 for tokens in per_doc)
    if not shared_context:  # no prefix shared across docs: every doc computed at least its useful tokens
        assert all(spec.processed_tokens >= spec.useful_tokens for spec in specs)
    else:  # the shared few-shot prefix is paid once for several docs
        assert sum(per_doc[:7]) < sum(len(spec.input_tokens) for spec in specs[:7]) * 3


def test_row_split_counts_a_shared_node_once_over_its_docs():
    from lighteval_nanotron.models.engine.doc_tokens import row_doc_tokens
    from lighteval_nanotron.models.engine.packing import ModelRow

    # nodes 0-1 shared by docs 0 and 1; node 2 doc 0's, node 3 doc 1's; 4 padding positions
    row = ModelRow((5, 6, 7, 8), (0, 0, 1, 1), (0, 1, 2, 2), (2, 3), (1, 1), (0, 1), (0, 1))
    assert row_doc_tokens(row, 4, slot_doc=[0, 1]) == {0: 2.0, 1: 2.0}
    split = row_doc_tokens(row, 8, slot_doc=[0, 0])  # both targets doc 0's: it pays for everything
    assert split == {0: 8.0, 1: 0.0}


def test_batched_tokenization_gives_the_ids_of_one_call_per_text(tok):
    from tokenizers import Tokenizer

    from lighteval_nanotron.models.engine.scoring_plan import loglikelihood_rows
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter, encode_pair
    from lighteval_nanotron.tasks import Doc

    texts = ["Question: what is it?\nAnswer:", " a b", "", "x" * 300, "Answer: yes", "Question: what is it?\nAnswer:"]
    bare = TokenizerAdapter(Tokenizer.from_str(tok.tokenizer.backend_tokenizer.to_str()))
    for adapter in (tok, bare):
        for flag in (True, False):
            one_by_one = [adapter.encode(text, flag) for text in texts]
            with adapter.batched((text, flag) for text in texts):
                assert [adapter.encode(text, flag) for text in texts] == one_by_one
                assert adapter._batched  # the look-ups came from the batch
            assert not adapter._batched  # and are forgotten after the block
    cfg = EngineConfig(max_length=64)
    docs = [Doc("Question: one two  ", [" yes", "no ", ""], 0), Doc("", [" a"], 0), Doc("Q: z", [" b"], 0)]
    _, specs, _, _ = loglikelihood_rows(docs, tok, lambda d: d.query, cfg, 64, unconditioned=False)
    for doc, spec in zip(docs, specs):
        pairs = [encode_pair(tok, doc.query, c, cfg.add_special_tokens, cfg.pairwise_tokenization) for c in doc.choices]
        assert spec.output_tokens == [cont for _, cont in pairs] and spec.input_tokens == pairs[0][0]


def test_random_init_skipped_draws_nothing_and_restores_torch_init():
    import torch

    from lighteval_nanotron.checkpoints.no_init import RANDOM_INITS, random_init_skipped

    saved = {name: getattr(torch.nn.init, name) for name in RANDOM_INITS}
    state = torch.random.get_rng_state()
    with random_init_skipped():
        torch.nn.Linear(64, 64)
        torch.nn.Embedding(32, 8)
        assert torch.equal(torch.random.get_rng_state(), state)  # no random draw consumed
        assert torch.nn.LayerNorm(4).weight.eq(1).all()  # constant initialisations still run
    assert {name: getattr(torch.nn.init, name) for name in RANDOM_INITS} == saved
    torch.nn.Linear(4, 4)
    assert not torch.equal(torch.random.get_rng_state(), state)
