import pytest

from lighteval_nanotron.tasks import Doc
from lighteval_nanotron.tasks.fewshot import FewShotSampler, FewShotSelection, balanced_order, fewshot_label


def _doc(i, label):
    return Doc(query=f"q{i}", choices=["A", "B", "C"], gold_index="ABC".index(label))


POOL = [_doc(i, label) for i, label in enumerate("AAAABBBC")]


def test_balanced_order_alternates_labels_most_frequent_first():
    labels = [fewshot_label(d) for d in POOL]
    order = balanced_order(labels, seed=0)
    assert sorted(order) == list(range(len(POOL)))
    assert [labels[i] for i in order[:3]] == ["A", "B", "C"]
    assert balanced_order(labels, seed=0) == order


def test_fewshot_label_prefers_sorting_class():
    doc = Doc(query="q", choices=["x"], gold_index=0, fewshot_sorting_class="cls")
    assert fewshot_label(doc) == "cls"
    assert fewshot_label(POOL[5]) == "B"


@pytest.mark.parametrize("method", ["balanced", "random", "sequential"])
def test_fixed_methods_share_one_prefix_and_skip_self(method):
    sampler = FewShotSampler(method, POOL, seed=0)
    never = sampler.sample(3, doc_key="x", is_self=lambda i: False)
    assert len(never) == 3
    first = POOL.index(never[0])
    without_first = sampler.sample(3, doc_key="y", is_self=lambda i: i == first)
    assert never[0] not in without_first
    assert without_first[:2] == never[1:]
    if method == "sequential":
        assert never == POOL[:3]


@pytest.mark.parametrize("method", ["random_sampling", "random_sampling_from_train"])
def test_sampling_methods_draw_per_doc_deterministically(method):
    sampler = FewShotSampler(method, POOL, seed=0)
    draws = {key: sampler.sample(3, doc_key=key, is_self=lambda i: i == 0) for key in ("a", "b", "c", "d")}
    assert all(len(v) == 3 and POOL[0] not in v for v in draws.values())
    assert len({tuple(id(d) for d in v) for v in draws.values()}) > 1
    again = FewShotSampler(method, POOL, seed=0)
    assert all(again.sample(3, doc_key=k, is_self=lambda i: i == 0) == v for k, v in draws.items())


def test_never_more_than_the_pool_allows():
    sampler = FewShotSampler("random_sampling", POOL[:3], seed=0)
    assert len(sampler.sample(5, doc_key="a", is_self=lambda i: i == 1)) == 2
    assert FewShotSampler(None, [], seed=0).sample(2, doc_key="a", is_self=lambda i: False) == []
    assert FewShotSampler(None, POOL, seed=0).sample(0, doc_key="a", is_self=lambda i: False) == []
    assert FewShotSampler(None, POOL).method is FewShotSelection.balanced


@pytest.mark.parametrize(
    "task",
    ["toy_mc:eval_fs", "toy_mc:sampled", "toy_mc_random", "toy_mc_sequential", "toy_mc_from_train", "toy_mc:train_fs"],
)
def test_a_doc_is_never_its_own_fewshot_example(toy_task, task):
    docs = toy_task(f"custom|{task}|5").get_docs()
    for doc in docs:
        assert len(doc.fewshot_samples) == 5
        assert doc.query not in [f.query for f in doc.fewshot_samples]


def test_eval_split_pool_keeps_prefix_across_docs(toy_task):
    docs = toy_task("custom|toy_mc:eval_fs|2").get_docs()
    prefixes = {tuple(f.query for f in d.fewshot_samples) for d in docs}
    assert 1 < len(prefixes) <= 3  # one shared prefix, shifted only for the docs inside it
