"""The `extended` suite: tasks beyond lighteval's default table, loaded only when asked for.

- `extended|lambada:openai:perplexity`: word/byte perplexity and bits per byte of whole LAMBADA
  passages (the language-modelling view of the `lighteval|lambada:openai` data).
- `extended|arc:e:letters`: ARC-Easy in the letter formulation (MCF) that lighteval 0.11 only
  has for ARC-Challenge (`original|arc:c:letters`).

Both read data that ships in the `bundled` data dir.
"""

from __future__ import annotations

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks import default_prompts
from lighteval_nanotron.tasks.config import LightevalTaskConfig


def lambada_passage(line: dict, task_name: str = "") -> Doc:
    """The whole passage, scored token by token (a PERPLEXITY request)."""
    return Doc(task_name=task_name, query=line["text"], choices=[""], gold_index=0)


lambada_openai_perplexity = LightevalTaskConfig(
    name="lambada:openai:perplexity",
    suite=["extended"],
    prompt_function=lambada_passage,
    hf_repo="EleutherAI/lambada_openai",
    hf_subset="default",
    hf_avail_splits=["test"],
    evaluation_splits=["test"],
    generation_size=-1,
    metrics=[Metrics.word_perplexity, Metrics.byte_perplexity, Metrics.bits_per_byte],
    stop_sequence=["\n"],
)
arc_easy_letters = LightevalTaskConfig(
    name="arc:e:letters",
    suite=["extended"],
    prompt_function=default_prompts.arc_with_options_letters_predict,
    hf_repo="ai2_arc",
    hf_subset="ARC-Easy",
    hf_avail_splits=["train", "validation", "test"],
    evaluation_splits=["test"],
    generation_size=1,
    metrics=[Metrics.loglikelihood_acc, Metrics.exact_match],
    stop_sequence=["\n"],
)

TASKS_TABLE: list[LightevalTaskConfig] = [lambada_openai_perplexity, arc_easy_letters]
