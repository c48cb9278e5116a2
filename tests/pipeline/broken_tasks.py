"""Custom tasks for the failure-isolation tests: the toy tasks plus one whose sample metric raises,
one whose corpus aggregation raises, two whose gold index is out of range (99, -1), one with a doc
without choices and one whose gold choice is also a wrong choice."""

import numpy as np
from helpers_pipeline import TASKS_TABLE as TOY_TASKS
from helpers_pipeline import _config, mc_prompt

from lighteval_nanotron.metrics import LogProbPMINorm, Metrics
from lighteval_nanotron.metrics.metric import SampleLevelMetric
from lighteval_nanotron.tasks import Doc
from lighteval_nanotron.tasks.requests import SamplingMethod


def _explode(doc: Doc, model_response) -> float:
    raise ZeroDivisionError("injected metric failure")


def _explode_corpus(values) -> float:
    raise ValueError("injected aggregation failure")


SAMPLE_EXPLODES = SampleLevelMetric(
    metric_name="explodes", higher_is_better=True, category=SamplingMethod.LOGPROBS,
    sample_level_fn=_explode, corpus_level_fn=np.mean,
)  # fmt: skip
CORPUS_EXPLODES = SampleLevelMetric(
    metric_name="corpus_explodes", higher_is_better=True, category=SamplingMethod.LOGPROBS,
    sample_level_fn=lambda doc, response: 1.0, corpus_level_fn=_explode_corpus,
)  # fmt: skip


PMI_ACC = Metrics.loglikelihood_acc(sample_params={"logprob_normalization": LogProbPMINorm()})


def _second_row_as(choices=None, gold: int | None = None):
    """The toy prompt, with row 1's choices (a function of them) or gold index replaced."""

    def prompt(line: dict, task_name: str) -> Doc:
        doc = mc_prompt(line, task_name)
        if line["question"] != "klm":
            return doc
        return Doc(
            task_name=task_name,
            query=doc.query,
            choices=doc.choices if choices is None else choices(doc),
            gold_index=doc.gold_index if gold is None else gold,
        )

    return prompt


def _gold_twice(doc: Doc) -> list[str]:
    return [*doc.choices, doc.choices[doc.gold_index]]


TASKS_TABLE = [
    *TOY_TASKS,
    _config("toy_bad_metric", "mc", mc_prompt, [Metrics.loglikelihood_acc, SAMPLE_EXPLODES]),
    _config("toy_bad_corpus", "mc", mc_prompt, [CORPUS_EXPLODES]),
    _config("toy_gold_99", "mc", _second_row_as(gold=99), [Metrics.loglikelihood_acc]),
    _config("toy_gold_negative", "mc", _second_row_as(gold=-1), [Metrics.loglikelihood_acc]),
    _config("toy_no_choices", "mc", _second_row_as(choices=lambda doc: [], gold=0), [Metrics.loglikelihood_acc]),
    _config("toy_gold_twice", "mc", _second_row_as(choices=_gold_twice), [Metrics.loglikelihood_acc]),
    _config("toy_pmi_no_unconditioned", "mc", _second_row_as(), [PMI_ACC]),  # row 1 has no unconditioned_query
]
