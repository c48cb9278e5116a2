"""The `multilingual` suite, loaded only when asked for.

- `multilingual|copa_fra_demo`: a French COPA in lighteval's XCOPA format (premise without its
  final period, then "car" / "donc", each alternative scored). Its 20 items are this project's own
  French translations of the first 20 SuperGLUE COPA validation items (6 few-shot, 14 evaluated):
  a smoke test of non-English text and UTF-8 through the whole pipeline, not a benchmark. It
  ships in the `bundled` data dir only (`lighteval-nanotron/copa_fr_demo`).

Real multilingual benchmarks (XCOPA, XStoryCloze, Belebele, ...) are lighteval configs whose data
is not shipped here: define them as custom tasks and point a data dir at a local copy.
"""

from __future__ import annotations

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.default_prompts import copa_with_connectors

FRENCH_CONNECTORS = {"cause": "car", "effect": "donc"}


def copa_fr(line: dict, task_name: str = "") -> Doc:
    return copa_with_connectors(line, FRENCH_CONNECTORS, task_name)


copa_fra_demo = LightevalTaskConfig(
    name="copa_fra_demo",
    suite=["multilingual"],
    prompt_function=copa_fr,
    hf_repo="lighteval-nanotron/copa_fr_demo",
    hf_subset="default",
    hf_avail_splits=["train", "validation"],
    evaluation_splits=["validation"],
    generation_size=-1,
    metrics=[Metrics.loglikelihood_acc],
    stop_sequence=["\n"],
)

TASKS_TABLE: list[LightevalTaskConfig] = [copa_fra_demo]
