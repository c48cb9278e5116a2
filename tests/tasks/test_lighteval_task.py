import copy

import pytest

from lighteval_nanotron.tasks import Doc, LightevalTask, LightevalTaskConfig, SamplingMethod


def test_fewshot_split_prefers_train_then_dev_and_skips_eval_splits(toy_task):
    task = toy_task("custom|toy_mc:train_fs|0")
    assert task.fewshot_split == "train"
    assert task.get_first_possible_fewshot_splits(["test", "dev", "validation"]) == "dev"
    assert task.get_first_possible_fewshot_splits(["test", "train_sft", "dev"]) == "train_sft"
    assert task.get_first_possible_fewshot_splits(["validation", "test"]) is None


def test_eval_and_fewshot_docs_come_from_their_splits(toy_task):
    task = toy_task("custom|toy_mc:train_fs|1")
    eval_docs, fewshot_docs = task.eval_docs(), task.fewshot_docs()
    assert len(eval_docs) == 12 and len(fewshot_docs) == 8
    assert eval_docs[0].query.startswith("Question: validation question 0")
    assert fewshot_docs[0].query.startswith("Question: train question 0")
    assert [d.id for d in eval_docs] == [str(i) for i in range(12)]
    assert task.config.original_num_docs == 12


def test_eval_split_is_the_pool_when_no_fewshot_split(toy_task):
    task = toy_task("custom|toy_mc:eval_fs|3")
    assert task.fewshot_split is None
    assert [d.query for d in task.fewshot_docs()] == [d.query for d in task.eval_docs()]


def test_get_docs_sets_task_fields(toy_task):
    task = toy_task("custom|toy_gen|2")
    docs = task.get_docs()
    assert len(docs) == 5
    for doc in docs:
        assert doc.task_name == "custom|toy_gen|2"
        assert doc.sampling_methods == [SamplingMethod.GENERATIVE, SamplingMethod.PERPLEXITY]
        assert doc.generation_size == 16
        assert doc.stop_sequences == ["\n"]
        assert doc.num_samples == 3
        assert len(doc.fewshot_samples) == 2
        assert doc.id in {str(i) for i in range(5)}
    assert sorted(d.id for d in docs) == [str(i) for i in range(5)]
    assert task.config.effective_num_docs == 5


def test_get_docs_max_samples_is_a_fixed_shuffled_subset(toy_task):
    task = toy_task("custom|toy_mc:train_fs|0")
    all_ids = [d.id for d in task.get_docs()]
    assert all_ids != sorted(all_ids, key=int)  # shuffled once, with a fixed seed
    assert [d.id for d in task.get_docs(max_samples=4)] == all_ids[:4]
    assert len(task.get_docs(max_samples=100)) == 12


def test_get_docs_is_idempotent(toy_task):
    task = toy_task("custom|toy_mc:train_fs|3")
    cached_before = copy.deepcopy(task.eval_docs())
    first = task.get_docs(max_samples=5)
    second = task.get_docs(max_samples=5)
    assert first == second
    assert first[0] is not second[0]
    assert all(d.sampling_methods == [SamplingMethod.LOGPROBS] for d in second)
    assert task.eval_docs() == cached_before  # the cache is never mutated


def test_fewshots_do_not_depend_on_max_samples(toy_task):
    task = toy_task("custom|toy_mc:sampled|2")
    full = {d.id: [f.query for f in d.fewshot_samples] for d in task.get_docs()}
    part = {d.id: [f.query for f in d.fewshot_samples] for d in task.get_docs(max_samples=3)}
    assert all(full[i] == shots for i, shots in part.items())


def test_prompt_returning_none_drops_rows(toy_task):
    task = toy_task("custom|toy_mc_skip_odd|0")
    assert [d.id for d in task.eval_docs()] == ["0", "2", "4", "6", "8", "10"]


def test_hf_filter_is_applied(toy_task):
    task = toy_task("custom|toy_mc_filtered|0")
    assert len(task.eval_docs()) == 8
    assert all(d.gold_index != 0 for d in task.eval_docs())


def _dup_prompt(line, task_name):
    return Doc(query="same", choices=[" a", " b"], gold_index=line["__index"] % 2)


def test_must_remove_duplicate_docs(toy_data_dirs):
    config = LightevalTaskConfig(
        name="dups",
        prompt_function=_dup_prompt,
        hf_repo="toy/mc",
        hf_subset="default",
        metrics=[],
        must_remove_duplicate_docs=True,
    )
    docs = LightevalTask(config).eval_docs()
    assert [(d.id, d.gold_index) for d in docs] == [("0", 0), ("1", 1)]


def test_aggregation_merges_metric_aggregations(toy_task):
    task = toy_task("custom|toy_gen|0")
    aggregations = task.aggregation()
    assert list(aggregations) == ["em", "ppl"]
    assert aggregations["em"]([1.0, 0.0]) == 0.5


def test_download_dataset_worker_loads_and_filters(toy_task):
    task = toy_task("custom|toy_mc_filtered|0")
    dataset = LightevalTask.download_dataset_worker(task)
    assert sorted(dataset) == ["test", "train", "validation"]
    assert len(dataset["validation"]) == 8


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.distributed)])
def test_load_datasets_keeps_task_order(load_toy, processes):
    tasks = load_toy("custom|toy_gen|0,custom|toy_mc_filtered|0,custom|toy_mc:train_fs|0")
    LightevalTask.load_datasets(tasks, dataset_loading_processes=processes)
    gen, filtered, plain = tasks.values()
    assert sorted(gen.dataset) == ["test"] and len(gen.dataset["test"]) == 5
    assert len(filtered.dataset["validation"]) == 8  # the filter (a lambda) ran in this process
    assert len(plain.dataset["validation"]) == 12
    assert [d.query for d in plain.get_docs()] == [
        d.query for d in load_toy("toy_mc:train_fs")["custom|toy_mc:train_fs|0"].get_docs()
    ]
