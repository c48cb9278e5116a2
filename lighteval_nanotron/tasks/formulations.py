"""Cloze (`_cf`) and multiple-choice-letter (`_mcf`) formulations of nine English benchmarks.

Named as lighteval names its templated tasks, `<benchmark>_<language>_<formulation>[:subset]`
(`lighteval|arc_eng_cf:easy|0`, `lighteval|mmlu_eng_mcf:anatomy|5`, `lighteval|mmlu_eng_cf|0` for
the 57 subjects), rendered by `tasks.templates` as lighteval's templates render them, on the same
datasets and splits as the benchmarks' other built-in tasks (so the bundled slices serve them
offline). lighteval itself defines these formulations for other languages only; the row-to-fields
mapping of each benchmark is below (`*_fields`).

Metrics: CF scores answer texts of different lengths, so beside plain accuracy it has lighteval's
per-character `acc_norm`, the gold's bits per byte and its per-character probability among the
choices; MCF scores one letter per choice, so plain accuracy, the gold letter's probability and
its margin. Every accuracy and probability also gets its centered value (`*_centered`) in results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lighteval_nanotron.metrics import Metrics
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.default_prompts import texts_of
from lighteval_nanotron.tasks.templates import (
    Formulation,
    continuation_doc,
    hellaswag_doc,
    mcq_doc,
    winogrande_parts,
)

LANGUAGE = "eng"
LETTERS = "ABCDE"

Fields = dict[str, Any]


# --- each benchmark's row -> the template's fields ------------------------------------------------


def arc_fields(line: dict) -> Fields:
    gold = line["choices"]["label"].index(line["answerKey"])
    return {"question": line["question"], "choices": texts_of(line, "choices", "text"), "gold": gold}


def piqa_fields(line: dict) -> Fields:
    return {"question": line["goal"], "choices": [line["sol1"], line["sol2"]], "gold": int(line["label"])}


def siqa_fields(line: dict) -> Fields:
    return {
        "context": line["context"],
        "question": line["question"],
        "choices": [line["answerA"], line["answerB"], line["answerC"]],
        "gold": int(line["label"]) - 1,
    }


def openbookqa_fields(line: dict) -> Fields:
    return {
        "question": line["question_stem"],
        "choices": texts_of(line, "choices", "text"),
        "gold": LETTERS.index(line["answerKey"].strip()),
    }


def csqa_fields(line: dict) -> Fields:
    gold = line["choices"]["label"].index(line["answerKey"])
    return {"question": line["question"], "choices": texts_of(line, "choices", "text"), "gold": gold}


def mmlu_fields(line: dict) -> Fields:
    answer = line["answer"]
    gold = LETTERS.index(answer) if isinstance(answer, str) else int(answer)
    return {"question": line["question"], "choices": texts_of(line, "choices"), "gold": gold}


def hellaswag_fields(line: dict) -> Fields:
    return {
        "ctx_a": line["ctx_a"],
        "ctx_b": line["ctx_b"],
        "endings": texts_of(line, "endings"),
        "gold": int(line["label"]),
        "activity_label": line["activity_label"],
    }


def winogrande_fields(line: dict) -> Fields | None:
    parts = winogrande_parts(line["sentence"], line["option1"], line["option2"])
    if parts is None:
        return None
    context, continuations = parts
    return {"context": context, "continuations": continuations, "gold": int(line["answer"]) - 1}


# --- prompt functions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FormulatedPrompt:
    """`fn(line, task_name) -> Doc | None`: a benchmark's fields rendered in one formulation."""

    fields: Callable[[dict], Fields | None]
    render: Callable[..., Doc | None]
    formulation: Formulation

    def __call__(self, line: dict, task_name: str = "") -> Doc | None:
        fields = self.fields(line)
        if fields is None:
            return None
        return self.render(formulation=self.formulation, task_name=task_name, **fields)

    def __repr__(self) -> str:  # stable in results files (no memory addresses)
        return f"{self.fields.__name__}[{self.formulation.value}]"


@dataclass(frozen=True)
class Benchmark:
    """A dataset and how its rows become fields; `suffix` names a subset (`:easy`, `:anatomy`)."""

    name: str
    fields: Callable[[dict], Fields | None]
    render: Callable[..., Doc | None]
    hf_repo: str
    hf_subset: str
    evaluation_split: str
    few_shots_split: str
    suffix: str = ""
    few_shots_select: str | None = None


def _metrics(formulation: Formulation) -> list:
    if formulation is Formulation.MCF:
        return [Metrics.loglikelihood_acc, Metrics.normalized_mc_prob, Metrics.gold_margin]
    return [
        Metrics.loglikelihood_acc,
        Metrics.loglikelihood_acc_norm,
        Metrics.gold_bpb,
        Metrics.normalized_mc_prob_norm,
    ]


def task_name(benchmark: str, formulation: Formulation, suffix: str = "") -> str:
    """`arc_eng_cf:easy`: lighteval's `<benchmark>_<language>_<formulation>[:subset]`."""
    return f"{benchmark}_{LANGUAGE}_{formulation.value}{suffix}"


def _config(benchmark: Benchmark, formulation: Formulation) -> LightevalTaskConfig:
    return LightevalTaskConfig(
        name=task_name(benchmark.name, formulation, benchmark.suffix),
        suite=["lighteval"],
        prompt_function=FormulatedPrompt(benchmark.fields, benchmark.render, formulation),
        hf_repo=benchmark.hf_repo,
        hf_subset=benchmark.hf_subset,
        hf_avail_splits=[benchmark.few_shots_split, benchmark.evaluation_split],
        evaluation_splits=[benchmark.evaluation_split],
        few_shots_split=benchmark.few_shots_split,
        few_shots_select=benchmark.few_shots_select,
        generation_size=-1,
        metrics=_metrics(formulation),
        stop_sequence=["\n"],
    )


def benchmarks(mmlu_subjects: Sequence[str]) -> list[Benchmark]:
    """The nine benchmarks; MMLU once per subject."""
    return [
        Benchmark("arc", arc_fields, mcq_doc, "ai2_arc", "ARC-Easy", "test", "train", ":easy"),
        Benchmark("arc", arc_fields, mcq_doc, "ai2_arc", "ARC-Challenge", "test", "train", ":challenge"),
        Benchmark("hellaswag", hellaswag_fields, hellaswag_doc, "hellaswag", "default", "validation", "train"),
        Benchmark("piqa", piqa_fields, mcq_doc, "ybisk/piqa", "plain_text", "validation", "train"),
        Benchmark("siqa", siqa_fields, mcq_doc, "allenai/social_i_qa", "default", "validation", "train"),
        Benchmark(
            "winogrande", winogrande_fields, continuation_doc, "winogrande", "winogrande_xl", "validation", "train"
        ),
        Benchmark("openbookqa", openbookqa_fields, mcq_doc, "openbookqa", "main", "test", "train"),
        Benchmark("csqa", csqa_fields, mcq_doc, "commonsense_qa", "default", "validation", "train"),
        *(
            Benchmark(
                "mmlu", mmlu_fields, mcq_doc, "lighteval/mmlu", subject, "test", "dev", f":{subject}", "sequential"
            )
            for subject in mmlu_subjects
        ),
    ]


def formulation_tasks(mmlu_subjects: Sequence[str]) -> list[LightevalTaskConfig]:
    """Every benchmark in both formulations (CF first), for the built-in table."""
    return [_config(benchmark, formulation) for formulation in Formulation for benchmark in benchmarks(mmlu_subjects)]
