"""Custom tasks for the failure tests (passed as `custom_tasks:`): a healthy multiple-choice task,
one whose metric raises at evaluation time, one whose prompt function raises on world rank 0 only
(the rank that builds every rank's docs), one whose metric kills its own process (SIGKILL, as the
out-of-memory killer would) once a results file exists under `$KILL_WHEN_RESULTS_IN`.
Their data is written by `write_data(root)` to `<root>/toy/mc/test.jsonl`."""

import json
import os
import signal
from pathlib import Path

import numpy as np

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.metrics.metric import SampleLevelMetric
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.requests import Doc, SamplingMethod

ROWS = [
    {"question": "The sky is", "choices": [" blue", " loud"], "gold": 0},
    {"question": "Fire is", "choices": [" cold", " hot"], "gold": 1},
    {"question": "Ice is", "choices": [" cold", " hot"], "gold": 0},
]


def write_data(root: Path) -> Path:
    folder = root / "toy" / "mc"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return root


def mc_prompt(line: dict, task_name: str) -> Doc:
    return Doc(task_name=task_name, query=line["question"], choices=line["choices"], gold_index=line["gold"])


def prompt_failing_on_rank_0(line: dict, task_name: str) -> Doc:
    if os.environ.get("RANK") == "0":
        raise RuntimeError("injected prompt failure on rank 0")
    return mc_prompt(line, task_name)


def _explode(doc: Doc, model_response) -> float:
    raise ZeroDivisionError("injected metric failure")


def _kill_once_results_exist(doc: Doc, model_response) -> float:
    folder = os.environ.get("KILL_WHEN_RESULTS_IN")
    if folder and any(Path(folder).rglob("results_*.json")):
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0


KILLING_METRIC = SampleLevelMetric(
    metric_name="kills",
    higher_is_better=True,
    category=SamplingMethod.LOGPROBS,
    sample_level_fn=_kill_once_results_exist,
    corpus_level_fn=np.mean,
)

EXPLODING_METRIC = SampleLevelMetric(
    metric_name="explodes",
    higher_is_better=True,
    category=SamplingMethod.LOGPROBS,
    sample_level_fn=_explode,
    corpus_level_fn=np.mean,
)


def _config(name: str, prompt, metrics) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=name,
        prompt_function=prompt,
        hf_repo="toy",
        hf_subset="mc",
        metrics=metrics,
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        suite=["custom"],
    )


TASKS_TABLE = [
    _config("toy_ok", mc_prompt, [Metrics.loglikelihood_acc]),
    _config("toy_bad_metric", mc_prompt, [EXPLODING_METRIC]),
    _config("toy_bad_prompt_rank0", prompt_failing_on_rank_0, [Metrics.loglikelihood_acc]),
    _config("toy_killing", mc_prompt, [KILLING_METRIC]),
]
