"""Every built-in task loads from the shipped slices and renders sound, deterministic prompts."""

from __future__ import annotations

import pytest

from lighteval_nanotron.requests import SamplingMethod
from lighteval_nanotron.tasks import (
    PromptManager,
    Registry,
    community,
    default_tasks,
    extended,
    multilingual,
    set_data_dirs,
)

ALL_CONFIGS = [config for module in (default_tasks, extended, community, multilingual) for config in module.TASKS_TABLE]
ALL_KEYS = [f"{config.suite[0]}|{config.name}" for config in ALL_CONFIGS]

# The keys the brief and lighteval 0.11 use (config.suite[0] and name), plus the aliases.
EXPECTED_KEYS = [
    "lighteval|arc:easy",
    "leaderboard|arc:challenge",
    "original|arc:c:letters",
    "leaderboard|hellaswag",
    "lighteval|hellaswag",
    "helm|hellaswag",
    "lighteval|piqa",
    "helm|siqa",
    "leaderboard|winogrande",
    "lighteval|openbookqa",
    "helm|openbookqa",
    "helm|commonsenseqa",
    "lighteval|super_glue:boolq",
    "lighteval|sciq",
    "lighteval|super_glue:copa",
    "leaderboard|mmlu:abstract_algebra",
    "leaderboard|mmlu:world_religions",
    "lighteval|lambada:openai",
    "lambada|lambada:openai",
    "lighteval|triviaqa",
    "leaderboard|gsm8k",
    "lighteval|gsm8k",
    "extended|lambada:openai:perplexity",
    "extended|arc:e:letters",
    "community|nq_open",
    "multilingual|copa_fra_demo",
]


@pytest.fixture(autouse=True)
def bundled_data():
    """Runs after the package conftest's data-dir fixture, which restores the setting afterwards."""
    set_data_dirs(["bundled"])


def load(spec: str):
    return Registry(tasks=spec).load_tasks()


def test_table_keys_are_unique():
    assert len(ALL_KEYS) == len(set(ALL_KEYS))
    assert sum(key.startswith("leaderboard|mmlu:") for key in ALL_KEYS) == 57


@pytest.mark.parametrize("key", EXPECTED_KEYS)
def test_lighteval_keys_resolve(key):
    tasks = load(f"{key}|0")
    assert len(tasks) == 1
    task = next(iter(tasks.values()))
    assert task.name == key.split("|", 1)[1]


def test_lighteval_hellaswag_is_its_own_task_with_leaderboard_settings():
    task = next(iter(load("lighteval|hellaswag|0").values()))
    assert task.full_name == "lighteval|hellaswag|0"
    assert task.config.prompt_function is default_tasks.hellaswag_leaderboard.prompt_function


def test_mmlu_superset_expands_to_57_subjects():
    tasks = load("leaderboard|mmlu|0")
    assert len(tasks) == 57
    assert {t.config.hf_subset for t in tasks.values()} == set(default_tasks.MMLU_SUBJECTS)


def _check_docs(docs, task) -> None:
    assert docs, task.full_name
    for doc in docs:
        assert doc.query.strip(), (task.full_name, doc.id)
        golds = doc.gold_index if isinstance(doc.gold_index, list) else [doc.gold_index]
        assert golds and all(0 <= g < len(doc.choices) for g in golds), (task.full_name, doc.id)
        if SamplingMethod.LOGPROBS in doc.sampling_methods:
            assert len(doc.choices) >= 1 and all(isinstance(c, str) and c for c in doc.choices)
        if SamplingMethod.GENERATIVE in doc.sampling_methods:
            assert doc.generation_size is not None and doc.generation_size > 0


@pytest.mark.parametrize("key", ALL_KEYS)
@pytest.mark.parametrize("num_fewshots", [0, 5])
def test_every_builtin_task_builds_docs_and_prompts(key, num_fewshots):
    manager = PromptManager()
    spec = f"{key}|{num_fewshots}"
    task = next(iter(load(spec).values()))
    docs = task.get_docs()
    _check_docs(docs, task)
    prompts = [manager.prepare_prompt(doc) for doc in docs]
    assert all(p.strip() for p in prompts)

    short = sum(len(doc.fewshot_samples) < num_fewshots for doc in docs)
    assert short == task.fewshot_record().get("docs_with_fewer_examples", 0), spec  # lighteval's own shortfalls
    for doc, prompt in zip(docs, prompts):
        assert len(doc.fewshot_samples) == num_fewshots or short, (spec, doc.id)
        body = (
            doc.query[len(doc.instruction) :].strip()
            if doc.instruction and doc.query.startswith(doc.instruction)
            else doc.query
        )
        assert prompt.endswith(body)
        for example in doc.fewshot_samples:
            assert example.query != doc.query, (spec, doc.id)

    again = next(iter(load(spec).values())).get_docs()
    assert [manager.prepare_prompt(doc) for doc in again] == prompts
    assert [d.id for d in again] == [d.id for d in docs]


def test_generative_tasks_carry_stop_sequences_and_sizes():
    sizes = {
        "lighteval|triviaqa": (20, ["\n", ".", ","]),
        "leaderboard|gsm8k": (256, []),
        "lighteval|gsm8k": (256, ["Question:"]),
        "helm|siqa": (1, ["\n"]),
    }
    for key, (size, stops) in sizes.items():
        doc = next(iter(load(f"{key}|0").values())).get_docs(max_samples=1)[0]
        assert (doc.generation_size, doc.stop_sequences) == (size, stops), key
