"""A prefix shared by all docs of a task (few-shot examples) is computed once per evaluation."""

from __future__ import annotations

from lighteval_nanotron.models.engine.packing import ScoredSequence
from lighteval_nanotron.models.engine.shared_prefix import split_shared_prefixes
from lighteval_nanotron.requests import Doc
from tests.helpers.distributed import run_distributed
from tests.models.engine_cases import assert_same


def _choices(prefix: tuple[int, ...], question: tuple[int, ...], doc: int, slot: int) -> list[ScoredSequence]:
    """Two single-token choices after `prefix + question`."""
    context = prefix + question
    return [ScoredSequence(context + (c,), (len(context) - 1,), (c,), (slot + k,), doc) for k, c in enumerate((7, 8))]


def test_split_takes_one_prefix_per_task_and_keeps_every_token():
    task_a, task_b = tuple(range(100, 140)), tuple(range(200, 230))
    sequences = []
    for doc in range(4):
        sequences += _choices(task_a, (50 + doc, 60 + doc), doc, 2 * doc)
    for doc in range(4, 7):
        sequences += _choices(task_b, (50 + doc,), doc, 2 * doc)
    sequences += _choices((1, 2, 3), (4,), 7, 14)  # shares nothing long with anyone
    split, prefixes = split_shared_prefixes(sequences, min_tokens=16)
    assert sorted(prefixes) == sorted([task_a, task_b])
    for before, after in zip(sequences, split):
        if after.context < 0:
            assert after == before
            continue
        prefix = prefixes[after.context]
        assert after.context_length == len(prefix)
        assert prefix + after.input_ids == before.input_ids
        assert [p + len(prefix) for p in after.positions] == list(before.positions)
        assert after.targets == before.targets and after.slots == before.slots
    assert {s.context for s in split[-2:]} == {-1}


def test_one_docs_choices_a_short_common_prefix_or_a_group_within_one_row_are_not_split_out():
    one_doc = _choices(tuple(range(100, 140)), (5,), 0, 0)
    assert split_shared_prefixes(one_doc, 16)[1] == []
    two_docs = one_doc + _choices(tuple(range(100, 140)), (6,), 1, 2)  # 40 + 4 x 2 nodes
    assert split_shared_prefixes(two_docs, 16, row_width=46)[1] == []
    assert len(split_shared_prefixes(two_docs, 16, row_width=45)[1]) == 1
    short = _choices(tuple(range(100, 110)), (5,), 0, 0) + _choices(tuple(range(100, 110)), (6,), 1, 2)
    assert split_shared_prefixes(short, 16)[1] == []


def test_the_prefix_stops_before_the_first_read_position():
    prefix = tuple(range(100, 140))
    sequences = [  # the second doc's logits are read from its 21st token on
        ScoredSequence(prefix + (1,), (40,), (1,), (0,), 0),
        ScoredSequence(prefix + (2,), (20,), (prefix[21],), (1,), 1),
    ]
    split, prefixes = split_shared_prefixes(sequences, 16)
    assert prefixes == [prefix[:20]] and split[1].positions == (0,)


SHOTS = [Doc(query=f"Is thing number {i} hot or cold?", choices=[" hot", " cold"], gold_index=i % 2) for i in range(3)]


def _task_docs() -> list[Doc]:
    """Twelve docs of one 3-shot task (the shots are the shared prefix)."""
    return [
        Doc(
            query=f"Is item {i} hot?",
            choices=[" hot", " cold", " warm enough"],
            gold_index=i % 3,
            fewshot_samples=SHOTS,
        )
        for i in range(12)
    ]


def evaluate_task(checkpoint: str, tp: int, pp: int, dp: int, config: dict) -> dict:
    """Rank function: the 3-shot task's log-likelihoods twice (two evaluations of one plan)."""
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    context = parallel_context(tp, pp, dp)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(gather_to="all", **config))
    plan = engine.prepare_loglikelihood(_task_docs())
    prefix_lengths = [len(b.input_ids[0]) for b in plan.prefixes.batches]
    return {
        "loglikelihood": engine.run(plan),
        "again": engine.run(plan),
        "rolling": [],
        "stats": plan.stats,
        "prefix_widths": prefix_lengths,
    }


def _run(checkpoint, tp, pp, dp, **config) -> list[dict]:
    return run_distributed(evaluate_task, tp * pp * dp, str(checkpoint), tp, pp, dp, config, timeout=180)


def test_prefix_positions_processed_once_per_task_with_identical_results(tiny_checkpoint):
    small_rows = dict(pack_width=24, tokens_per_batch=48)  # the docs fill several packed rows
    off = _run(tiny_checkpoint, 1, 1, 1, shared_prefix=False, **small_rows)[0]
    on = _run(tiny_checkpoint, 1, 1, 1, **small_rows)[0]
    assert_same(on, off, generations=False)
    assert_same({**on, "loglikelihood": on["again"]}, off, generations=False)
    stats, before = on["stats"], off["stats"]
    assert stats.shared_prefixes == 1 and before.shared_prefixes == 0
    assert stats.batches > 2  # several micro-batches read the prefix
    # the prefix's positions once, read by every row instead of recomputed in each
    assert stats.shared_prefix_reads >= 3 * stats.shared_prefix_tokens > 0
    assert stats.processed_tokens < before.processed_tokens
    assert stats.useful_tokens == before.useful_tokens
    pp2 = _run(tiny_checkpoint, 1, 2, 1, **small_rows)
    assert_same(pp2[-1], off, generations=False)
    tp2 = _run(tiny_checkpoint, 2, 1, 1, **small_rows)
    assert_same(tp2[1], off, generations=False)
    dp2 = _run(tiny_checkpoint, 1, 1, 2, **small_rows)
    assert_same(dp2[0], off, generations=False)
    # each replica computes the prefix once for the rows it reads it from
    assert dp2[0]["stats"].shared_prefix_tokens == 2 * stats.shared_prefix_tokens


def test_a_docs_choices_start_a_new_row_together():
    from lighteval_nanotron.models.engine.packing import packed_rows

    sequences = []
    for doc in range(6):  # a 6-token context and three 2-token choices: 12 nodes per doc
        context = (10 * doc + 1,) + tuple(range(100 + 10 * doc, 105 + 10 * doc))
        sequences += [
            ScoredSequence(context + (c, c + 1), (5, 6), (c, c + 1), (3 * doc + k,) * 2, doc)
            for k, c in enumerate((500, 600, 700))
        ]
    rows = [row for part in packed_rows(sequences, width=34, share=True) for row in part]
    assert all(len(set(row.doc_indices)) == len(row.doc_indices) for row in rows)
    docs = [doc for row in rows for doc in row.doc_indices]
    assert sorted(docs) == list(range(6))  # every doc in exactly one row: its context computed once
    assert sum(row.token_length for row in rows) == 6 * 12 and all(row.token_length <= 34 for row in rows)
