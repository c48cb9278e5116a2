"""lighteval 0.11's few-shot draws: the algorithm written out here, and lighteval's own draws.

`tests/tasks/data/lighteval_0.11_leaderboard_fewshots.json` was written by lighteval 0.11 itself
(`scripts/lighteval_fewshot_reference.py`, run in a separate environment with lighteval 0.11
installed): its `toy_draws` are the few-shot ids lighteval draws on the toy task for every
`few_shots_select`, with the pool in a train split and in the evaluation split.
"""

from __future__ import annotations

import json
import random

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.tasks import LightevalTask, LightevalTaskConfig
from lighteval_nanotron.tasks.fewshot import FewShotDraws
from lighteval_nanotron.tasks.fewshot_lighteval import balanced_pool, default_draws
from tests.tasks.data.toy_tasks import MC
from tests.tasks.toy_paths import DATA_DIR

REFERENCE = json.loads((DATA_DIR / "lighteval_0.11_leaderboard_fewshots.json").read_text(encoding="utf-8"))
TOY_POOLS = {"train": (["train", "validation"], "validation"), "eval": (["test"], "test")}


def toy_task(select: str, pool: str, num_fewshots: int, **changes) -> LightevalTask:
    splits, evaluation_split = TOY_POOLS[pool]
    settings = {
        "name": "toy",
        "suite": ["lighteval"],
        "hf_avail_splits": splits,
        "evaluation_splits": [evaluation_split],
        "few_shots_select": select,
        "num_fewshots": num_fewshots,
    }
    config = LightevalTaskConfig(**{**MC, **settings, **changes})
    return LightevalTask(config)


def draws(task: LightevalTask, max_samples: int | None = None) -> list[list]:
    return [[doc.id, [example.id for example in doc.fewshot_samples]] for doc in task.get_docs(max_samples)]


@pytest.mark.parametrize("select", ["random_sampling", "random_sampling_from_train"])
@pytest.mark.parametrize("num_fewshots", [1, 3])
def test_sampling_draws_follow_lighteval_algorithm(select, num_fewshots):
    """lighteval 0.11 `get_docs`: `rnd = random.Random(42)`, `rnd.shuffle(eval_docs)`, then for
    each doc in that order `rnd.sample(pool, k + 1)` (`random_sampling`) or `rnd.sample(pool, k)`
    (`random_sampling_from_train`), the pool in file order (variance seed 0), the first k kept."""
    task = toy_task(select, "train", num_fewshots)
    pool_ids = [doc.id for doc in task.fewshot_docs()]
    eval_ids = [doc.id for doc in task.eval_docs()]
    assert len(pool_ids) == 8 and len(eval_ids) == 12

    rnd = random.Random(42)
    order = list(eval_ids)
    rnd.shuffle(order)
    size = num_fewshots + 1 if select == "random_sampling" else num_fewshots
    expected = [[doc_id, rnd.sample(pool_ids, size)[:num_fewshots]] for doc_id in order]

    assert draws(task) == expected
    assert len({tuple(ids) for _, ids in expected}) > 1  # the draws really differ between docs
    assert draws(task, max_samples=5) == expected[:5]  # a prefix of the shuffle, same draws
    assert draws(task) == expected  # the same at every call


@pytest.mark.parametrize("key", sorted(REFERENCE["toy_draws"]))
def test_draws_equal_lighteval_0_11(key):
    select, pool, k = key.split("/")
    num_fewshots = int(k)
    task = toy_task(select, pool, num_fewshots)
    ours, theirs = draws(task), REFERENCE["toy_draws"][key]
    assert [doc_id for doc_id, _ in ours] == [doc_id for doc_id, _ in theirs]
    if pool == "train":
        assert ours == theirs
        assert task.fewshot_record()["docs_with_self_drawn"] == 0
        return
    # The pool is the evaluation split: lighteval 0.11 can show a doc itself; here it is dropped
    # and the next candidate moves up. Every other doc gets exactly lighteval's examples.
    self_drawn = 0
    for (doc_id, got), (_, expected) in zip(ours, theirs):
        assert doc_id not in got
        if doc_id in expected:
            self_drawn += 1
            without_self = [i for i in expected if i != doc_id]
            assert got[: len(without_self)] == without_self
            assert len(got) == min(num_fewshots, len(task.fewshot_docs()) - 1)
        else:
            assert got == expected
    assert self_drawn == task.fewshot_record()["docs_with_self_drawn"]
    assert 0 < self_drawn < len(ours) or select == "random_sampling"


def test_lighteval_is_the_default_for_lighteval_suites_only():
    assert default_draws("leaderboard") is FewShotDraws.lighteval
    assert default_draws("helm") is FewShotDraws.lighteval
    assert default_draws("community") is FewShotDraws.lighteval
    assert default_draws("custom") is FewShotDraws.per_doc
    assert default_draws("my_suite") is FewShotDraws.per_doc
    assert toy_task("random_sampling", "train", 2).fewshot_draws is FewShotDraws.lighteval
    assert toy_task("random_sampling", "train", 2, suite=["custom"]).fewshot_draws is FewShotDraws.per_doc


def test_per_doc_mode_is_a_task_option_and_differs_from_lighteval():
    lighteval_mode = toy_task("random_sampling", "train", 3)
    per_doc = toy_task("random_sampling", "train", 3, fewshot_draws="per_doc")
    assert per_doc.fewshot_draws is FewShotDraws.per_doc
    assert draws(per_doc) != draws(lighteval_mode)
    full = {doc_id: ids for doc_id, ids in draws(per_doc)}
    assert all(full[doc_id] == ids for doc_id, ids in draws(per_doc, max_samples=4))
    assert per_doc.fewshot_record() == {
        "draws": "per_doc",
        "select": "random_sampling",
        "num_fewshots": 3,
        "seed": 0,
        "doc_shuffle_seed": 42,
    }
    switched = toy_task("random_sampling", "train", 3)
    switched.set_fewshot_draws("per_doc")
    assert draws(switched) == draws(per_doc)
    with pytest.raises(ConfigError, match="fewshot_draws='lighteval-0.11'.*lighteval, per_doc"):
        switched.set_fewshot_draws("lighteval-0.11")
    with pytest.raises(ConfigError, match="fewshot_draws"):
        toy_task("random_sampling", "train", 3, fewshot_draws="harness")


def test_a_pool_too_small_for_lighteval_draws_is_refused():
    with pytest.raises(ConfigError, match=r"'lighteval\|toy\|8'.*9 few-shot .*pool of 8"):
        toy_task("random_sampling", "train", 8).get_docs()
    assert len(draws(toy_task("random_sampling_from_train", "train", 8))[0][1]) == 8
    assert len(draws(toy_task("random_sampling", "train", 8, fewshot_draws="per_doc"))[0][1]) == 8


def test_balanced_pool_cycles_labels_and_stops_at_an_empty_label():
    labels = ["a", "a", "a", "b", "b", "c"]
    picked = balanced_pool(labels, num_fewshots=3, seed=0)
    assert len(picked) == 4 and len(set(picked)) == 4
    assert [labels[i] for i in picked][:3] == ["a", "b", "c"]  # most frequent first, then cycled
    assert [labels[i] for i in picked][3] == "a"
    assert balanced_pool(labels, 3, seed=0) == picked
    assert len(balanced_pool(labels, num_fewshots=10, seed=1)) == len(labels)
    assert balanced_pool(["", "", "x"], num_fewshots=2, seed=0) == []  # lighteval breaks on a falsy label


def test_results_record_what_makes_draws_comparable():
    task = toy_task("random_sampling", "eval", 2)
    task.get_docs()
    record = task.fewshot_record()
    assert record["draws"] == "lighteval" and record["same_draws_as"] == "lighteval==0.11"
    assert (record["select"], record["num_fewshots"], record["seed"], record["doc_shuffle_seed"]) == (
        "random_sampling",
        2,
        0,
        42,
    )
    assert record["docs_with_fewer_examples"] == 0
