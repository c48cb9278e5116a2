"""The `community` suite: tasks contributed outside lighteval's core table, loaded only when asked.

- `community|nq_open`: Natural Questions (open-domain, short answers), generative; a prediction
  counts when it matches any of the gold answers after HELM normalization (whole string or
  prefix), plus bag-of-words F1. Data ships in the `bundled` data dir.
"""

from __future__ import annotations

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.metrics.normalizations import helm_normalizer
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks.config import LightevalTaskConfig


def nq_open(line: dict, task_name: str = "") -> Doc:
    """`Question: ...?\\nAnswer:`; every listed answer is gold."""
    answers = [f" {answer}" for answer in line["answer"]]
    return Doc(
        task_name=task_name,
        query=f"Question: {line['question']}?\nAnswer:",
        choices=answers,
        gold_index=list(range(len(answers))),
    )


_HELM_NORMALIZED = {"normalize_gold": helm_normalizer, "normalize_pred": helm_normalizer}

nq_open_community = LightevalTaskConfig(
    name="nq_open",
    suite=["community"],
    prompt_function=nq_open,
    hf_repo="google-research-datasets/nq_open",
    hf_subset="nq_open",
    hf_avail_splits=["train", "validation"],
    evaluation_splits=["validation"],
    few_shots_select="random_sampling_from_train",
    generation_size=32,
    metrics=[
        Metrics.exact_match(sample_params=_HELM_NORMALIZED),
        Metrics.exact_match(sample_params={**_HELM_NORMALIZED, "type_exact_match": "prefix"}),
        Metrics.f1_score(sample_params=_HELM_NORMALIZED),
    ],
    stop_sequence=["\n", "Question:"],
)

TASKS_TABLE: list[LightevalTaskConfig] = [nq_open_community]
