"""The toy tasks of `helpers_pipeline`, written exactly as for lighteval 0.10 (its classes, its metrics)."""

from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=line["choices"], gold_index=line["gold"])


def gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=[line["answer"]], gold_index=0)


def ppl_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["text"], choices=[], gold_index=0)


def _config(name: str, subset: str, prompt, metric, **extra) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=name,
        prompt_function=prompt,
        hf_repo="toy",
        hf_subset=subset,
        metric=metric,
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        suite=["custom"],
        **extra,
    )


TASKS_TABLE = [
    _config("toy_mc", "mc", mc_prompt, [Metrics.loglikelihood_acc, Metrics.loglikelihood_acc_norm]),
    _config(
        "toy_gen",
        "gen",
        gen_prompt,
        [Metrics.exact_match, Metrics.loglikelihood_acc],
        generation_size=12,
        stop_sequence=["\n"],
    ),
    _config("toy_ppl", "ppl", ppl_prompt, [Metrics.word_perplexity, Metrics.bits_per_byte]),
    # metrics this project does not have: run through lighteval's own implementation
    _config(
        "toy_gen_lighteval_metrics",
        "gen",
        gen_prompt,
        [Metrics.perfect_exact_match, Metrics.rouge1],
        generation_size=12,
        stop_sequence=["\n"],
    ),
]
