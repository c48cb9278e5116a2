"""The toy tasks of `helpers_pipeline`, written exactly as for lighteval 0.11: its classes, `metrics=`,
`suite=`, `trust_dataset=`, `truncate_fewshots=` (fields later lighteval releases removed), its metric
parameters."""

from lighteval.metrics.metrics import Metrics
from lighteval.metrics.normalizations import LogProbCharNorm, LogProbPMINorm
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(
        task_name=task_name,
        query=line["question"],
        choices=line["choices"],
        gold_index=line["gold"],
        unconditioned_query=line["question"][-1:],
    )


def gen_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=[line["answer"]], gold_index=0)


def ppl_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["text"], choices=[], gold_index=0)


def _config(name: str, subset: str, prompt, metrics, **extra) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=name,
        prompt_function=prompt,
        hf_repo="toy",
        hf_subset=subset,
        metrics=metrics,
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        suite=["custom"],
        trust_dataset=True,
        truncate_fewshots=False,
        **extra,
    )


CHAR_NORM = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbCharNorm()})
TASKS_TABLE = [
    _config("toy_mc", "mc", mc_prompt, [Metrics.loglikelihood_acc, CHAR_NORM]),
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
    # metrics this project does not have built in: lighteval's own code computes them
    _config(
        "toy_gen_lighteval_metrics",
        "gen",
        gen_prompt,
        [Metrics.exact_match(sample_params={"strip_strings": False}), Metrics.rouge1],
        generation_size=12,
        stop_sequence=["\n"],
    ),
]
