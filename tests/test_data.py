"""The data layer: token-length sorting, original order, splits, generation groups, sampler."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.models.engine.data import (
    DynamicBatchDataset,
    GenDistributedSampler,
    GenerativeTaskDataset,
    GenerativeTaskDatasetNanotron,
    LoglikelihoodDataset,
    token_balanced_owners,
)
from lighteval_nanotron.requests import Doc


@dataclass
class Req:
    name: str
    token_length: int
    generation_size: int | None = None
    stop_sequences: list[str] | None = None
    use_logits: bool = False
    num_samples: int = 1


def test_loglikelihood_sorts_by_tokens_longest_first_and_stable():
    reqs = [Req("a", 3), Req("b", 9), Req("c", 3), Req("d", 5)]
    data = LoglikelihoodDataset(reqs, num_dataset_splits=1)
    assert [r.name for r in data] == ["b", "d", "a", "c"]
    assert data.get_original_order([r.name for r in data]) == ["a", "b", "c", "d"]


def test_sorting_uses_token_length_not_characters():
    docs = [
        Doc(query="x" * 50, choices=[" a"], gold_index=0),
        Doc(query="many short words here", choices=[" a"], gold_index=0),
    ]
    tokens = {docs[0].query: 2, docs[1].query: 4}  # the long string is few tokens
    data = LoglikelihoodDataset(docs, 1, token_length=lambda d: tokens[d.query])
    assert data[0] is docs[1]


def test_docs_without_token_length_raise_a_config_error():
    with pytest.raises(ConfigError, match="token_length"):
        LoglikelihoodDataset([Doc(query="q", choices=[], gold_index=0)], 1)


def test_splits_iterator_and_len():
    data = LoglikelihoodDataset([Req(str(i), i) for i in range(10)], num_dataset_splits=3)
    splits = list(data.splits_iterator())
    assert [len(s) for s in splits] == [4, 4, 2]
    assert [s[0].token_length for s in splits] == [9, 5, 1]
    assert len(data) == 10 and data.num_dataset_splits == 3
    assert list(LoglikelihoodDataset([], 2).splits_iterator()) == []


def test_too_many_splits_fall_back_to_one():
    data = LoglikelihoodDataset([Req("a", 1), Req("b", 2)], num_dataset_splits=5)
    assert data.num_dataset_splits == 1 and data.splits == [(0, 2)]


def test_get_original_order_rejects_wrong_length():
    data = LoglikelihoodDataset([Req("a", 1), Req("b", 2)], 1)
    with pytest.raises(ValueError, match="one item per request"):
        data.get_original_order([1])


def test_generative_groups_by_settings_then_length():
    reqs = [
        Req("short-stop", 2, 10, ["\n"]),
        Req("long-nostop", 8, 10),
        Req("long-stop", 9, 10, ["\n"]),
        Req("other-size", 4, 5),
    ]
    data = GenerativeTaskDataset(reqs, num_dataset_splits=None)
    groups = [[r.name for r in split] for split in data.splits_iterator()]
    assert groups == [["other-size"], ["long-nostop"], ["long-stop", "short-stop"]]
    assert data.num_dataset_splits == 3


def test_generative_nanotron_items_carry_their_sorted_index():
    data = GenerativeTaskDatasetNanotron([Req("a", 1, 4), Req("b", 7, 4)], None)
    assert data[0] == (0, data.sorted_data[0]) and data[0][1].name == "b"


def test_base_dataset_needs_a_sorting_criterion():
    with pytest.raises(NotImplementedError):
        DynamicBatchDataset([Req("a", 1)], 1)


def test_gen_distributed_sampler_pads_with_the_last_index():
    data = LoglikelihoodDataset([Req(str(i), i) for i in range(5)], 1)
    shards = [list(GenDistributedSampler(data, num_replicas=2, rank=r, shuffle=False)) for r in range(2)]
    assert shards == [[0, 2, 4], [1, 3, 4]]
    dropped = [
        list(GenDistributedSampler(data, num_replicas=2, rank=r, shuffle=False, drop_last=True)) for r in range(2)
    ]
    assert dropped == [[0, 2], [1, 3]]


def test_gen_distributed_sampler_shuffle_is_seeded():
    data = LoglikelihoodDataset([Req(str(i), i) for i in range(8)], 1)
    first = list(GenDistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=3))
    assert first == list(GenDistributedSampler(data, num_replicas=2, rank=0, shuffle=True, seed=3))
    both = first + list(GenDistributedSampler(data, num_replicas=2, rank=1, shuffle=True, seed=3))
    assert sorted(both) == list(range(8))


def test_sampler_token_balanced_split_gives_each_request_to_one_replica_in_sorted_order():
    reqs = [Req(str(i), length) for i, length in enumerate([9, 1, 5, 5, 3, 8, 2, 7])]
    data = LoglikelihoodDataset(reqs, num_dataset_splits=None)
    shares = [list(GenDistributedSampler(data, 3, rank, shuffle=False, split="token_balanced")) for rank in range(3)]
    assert sorted(i for share in shares for i in share) == list(range(len(reqs)))  # no padding, no duplicate
    assert all(share == sorted(share) for share in shares)  # the dataset's (longest-first) order
    loads = [sum(data[i].token_length for i in share) for share in shares]
    assert max(loads) - min(loads) <= 1 and sum(loads) == 40
    owners = token_balanced_owners([r.token_length for r in reqs], 3)
    assert [[data[i].name for i in share] for share in shares] == [
        [r.name for r in data if owners[int(r.name)] == rank] for rank in range(3)
    ]
    assert len(GenDistributedSampler(data, 3, 0, shuffle=False, split="token_balanced")) == len(shares[0])


def test_sampler_token_balanced_split_follows_an_assignment_and_balances_generation_budgets():
    reqs = [Req("a", 2, generation_size=10), Req("b", 9, generation_size=1), Req("c", 3, generation_size=1)]
    data = GenerativeTaskDatasetNanotron(reqs, num_dataset_splits=None)
    shares = [list(GenDistributedSampler(data, 2, rank, shuffle=False, split="token_balanced")) for rank in range(2)]
    assert [[data[i][1].name for i in share] for share in shares] == [["a"], ["b", "c"]]  # 12 vs 10 + 4 tokens
    fixed = GenDistributedSampler(data, 2, 1, shuffle=False, split="token_balanced", assignment=[1, 0, 1])
    assert sorted(data[i][1].name for i in fixed) == ["a", "c"]


def test_sampler_split_errors_and_default_stays_strided():
    data = LoglikelihoodDataset([Req("a", 1), Req("b", 2), Req("c", 3)], num_dataset_splits=None)
    assert list(GenDistributedSampler(data, 2, 1, shuffle=False)) == [1, 2]  # strided, padded with the last index
    with pytest.raises(ConfigError, match="shuffle=False"):
        GenDistributedSampler(data, 2, 0, split="token_balanced")
    with pytest.raises(ConfigError, match="strided"):
        GenDistributedSampler(data, 2, 0, shuffle=False, split="round_robin")
    with pytest.raises(ConfigError, match="3 requests"):
        GenDistributedSampler(data, 2, 0, shuffle=False, split="token_balanced", assignment=[0])
