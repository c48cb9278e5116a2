"""The toy tasks of `helpers_pipeline`, written exactly as for lighteval 0.13: no suite, inspect-ai
fields beside the prompt function, and a prompt function that returns None to skip a row."""

from inspect_ai.dataset import Sample
from lighteval.metrics.metrics import Metrics
from lighteval.metrics.normalizations import LogProbCharNorm, LogProbPMINorm
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

SKIPPED_QUESTION = "efg"  # `toy_mc_skip` drops this row


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=line["question"],
        choices=line["choices"],
        gold_index=line["gold"],
        unconditioned_query=line["question"][-1:],
    )


def mc_prompt_skipping(line: dict, task_name: str) -> Doc | None:
    return None if line["question"] == SKIPPED_QUESTION else mc_prompt(line, task_name)


def gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=[line["answer"]], gold_index=0)


def ppl_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["text"], choices=[], gold_index=0)


def mc_sample(record: dict) -> Sample:
    return Sample(input=record["question"], choices=record["choices"], target="AB"[record["gold"]])


def _config(name: str, subset: str, prompt, metrics, **extra) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=name,
        prompt_function=prompt,
        hf_repo="toy",
        hf_subset=subset,
        metrics=metrics,
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        **extra,
    )


CHAR_NORM = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})
TASKS_TABLE = [
    _config("toy_mc", "mc", mc_prompt, [Metrics.loglikelihood_acc, CHAR_NORM], sample_fields=mc_sample),
    _config(
        "toy_gen",
        "gen",
        gen_prompt,
        [Metrics.exact_match, Metrics.loglikelihood_acc],
        generation_size=12,
        stop_sequence=["\n"],
    ),
    _config("toy_ppl", "ppl", ppl_prompt, [Metrics.word_perplexity, Metrics.bits_per_byte]),
    _config(
        "toy_pmi",
        "mc",
        mc_prompt,
        [Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbPMINorm()})],
    ),
    _config(
        "toy_mc_skip",
        "mc",
        mc_prompt_skipping,
        [Metrics.loglikelihood_acc],
        sample_fields=mc_sample,
        filter=lambda sample: sample.input != SKIPPED_QUESTION,
    ),
]
