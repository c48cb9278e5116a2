"""A small custom tasks module for the task-layer tests (datasets under this folder, `toy/...`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from lighteval_nanotron.tasks import Doc, LightevalTaskConfig, SamplingMethod


@dataclass(frozen=True)
class ToySampleFn:
    """A parametrizable sample-level function (its dataclass fields are its parameters)."""

    k: int = 1

    def __call__(self, doc: Doc, response: Any) -> float:
        return 0.0


def mean(values: list[float]) -> float:
    return sum(values) / max(len(values), 1)


@dataclass(frozen=True)
class ToyMetric:
    """The metric contract the task layer relies on, and nothing more."""

    metric_name: str
    category: SamplingMethod
    higher_is_better: bool = True
    sample_level_fn: Any = field(default_factory=ToySampleFn)

    def get_corpus_aggregations(self) -> dict:
        return {self.metric_name: mean}

    def __call__(self, sample_params: dict | None = None) -> ToyMetric:
        params = dict(sample_params or {})
        return dataclasses.replace(
            self,
            metric_name=f"{self.metric_name}_with_{'&'.join(params)}",
            sample_level_fn=dataclasses.replace(self.sample_level_fn, **params),
        )


ACC = ToyMetric("acc", SamplingMethod.LOGPROBS)
EXACT = ToyMetric("em", SamplingMethod.GENERATIVE)
PPL = ToyMetric("ppl", SamplingMethod.PERPLEXITY, higher_is_better=False, sample_level_fn=len)


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        query=f"Question: {line['question']}\nAnswer:",
        choices=[f" {c}" for c in line["choices"]],
        gold_index=line["answer_index"],
        task_name=task_name,
    )


def gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        query=f"Compute.\n{line['text']}",
        choices=[line["target"]],
        gold_index=0,
        instruction="Compute.\n",
        task_name=task_name,
    )


def failing_prompt(line: dict, task_name: str) -> Doc | None:
    if line["__index"] == 2:
        raise KeyError("answer")
    return mc_prompt(line, task_name)


def skip_odd_prompt(line: dict, task_name: str) -> Doc | None:
    return None if line["__index"] % 2 else mc_prompt(line, task_name)


MC = {"prompt_function": mc_prompt, "hf_repo": "toy/mc", "hf_subset": "default", "metrics": [ACC]}

TASKS_TABLE = [
    LightevalTaskConfig(name="toy_mc:train_fs", suite=["custom", "toy"], **MC),
    LightevalTaskConfig(name="toy_mc:eval_fs", evaluation_splits=["test"], hf_avail_splits=["test"], **MC),
    LightevalTaskConfig(name="toy_mc:sampled", few_shots_select="random_sampling", **MC),
    LightevalTaskConfig(name="toy_mc_random", few_shots_select="random", **MC),
    LightevalTaskConfig(name="toy_mc_sequential", few_shots_select="sequential", **MC),
    LightevalTaskConfig(name="toy_mc_from_train", few_shots_select="random_sampling_from_train", **MC),
    LightevalTaskConfig(name="toy_mc_filtered", hf_filter=lambda row: row["answer_index"] != 0, **MC),
    LightevalTaskConfig(name="toy_mc_skip_odd", **{**MC, "prompt_function": skip_odd_prompt}),
    LightevalTaskConfig(
        name="toy_gen",
        prompt_function=gen_prompt,
        hf_repo="toy/gen",
        hf_subset="default",
        metrics=[EXACT, PPL],
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        generation_size=16,
        stop_sequence=["\n"],
        num_samples=[3],
    ),
    LightevalTaskConfig(name="toy_bad_prompt", **{**MC, "prompt_function": failing_prompt}),
    LightevalTaskConfig(name="toy_missing_split", evaluation_splits=["nope"], **MC),
    LightevalTaskConfig(name="toy_missing_data", **{**MC, "hf_repo": "toy/absent"}),
]

TASKS_GROUPS = {"toy_group": "custom|toy_mc:train_fs|1,custom|toy_gen|0", "toy_list_group": ["toy_gen|2"]}
