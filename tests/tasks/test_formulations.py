"""Cloze and letter formulations: names, data offline, and the same docs as lighteval's templates
render for the same rows (every evaluated and few-shot row of the bundled slices)."""

import pytest

from lighteval_nanotron.tasks import PromptManager, Registry
from lighteval_nanotron.tasks.data_dirs import set_data_dirs
from lighteval_nanotron.tasks.default_tasks import MMLU_SUBJECTS, TASKS_TABLE
from lighteval_nanotron.tasks.formulations import FormulatedPrompt
from lighteval_nanotron.tasks.templates import Formulation, winogrande_parts

BENCHMARK_TASKS = [
    "arc_eng_{f}:easy",
    "arc_eng_{f}:challenge",
    "hellaswag_eng_{f}",
    "piqa_eng_{f}",
    "siqa_eng_{f}",
    "winogrande_eng_{f}",
    "openbookqa_eng_{f}",
    "csqa_eng_{f}",
]


@pytest.fixture
def bundled():
    set_data_dirs(["bundled"])
    yield
    set_data_dirs(None)


def test_every_benchmark_has_both_formulations_under_lighteval_names():
    names = {config.name for config in TASKS_TABLE if isinstance(config.prompt_function, FormulatedPrompt)}
    expected = {name.format(f=f) for name in BENCHMARK_TASKS for f in ("cf", "mcf")}
    expected |= {f"mmlu_eng_{f}:{subject}" for f in ("cf", "mcf") for subject in MMLU_SUBJECTS}
    assert names == expected


def test_formulations_load_offline_and_render(bundled):
    specs = ",".join(f"lighteval|{name.format(f=f)}|0" for name in BENCHMARK_TASKS for f in ("cf", "mcf"))
    tasks = Registry(specs + ",lighteval|mmlu_eng_cf|0").load_tasks()
    assert len(tasks) == 16 + 57
    prompts = PromptManager()
    arc_cf, arc_mcf = tasks["lighteval|arc_eng_cf:easy|0"], tasks["lighteval|arc_eng_mcf:easy|0"]
    cf_doc, mcf_doc = arc_cf.get_docs(1)[0], arc_mcf.get_docs(1)[0]
    assert prompts.prepare_prompt(cf_doc).startswith("Question: ") and prompts.prepare_prompt(cf_doc).endswith(
        "\nAnswer:"
    )
    assert mcf_doc.choices == [" A", " B", " C", " D"] and "\n A. " in mcf_doc.query
    assert cf_doc.choices[mcf_doc.gold_index[0]] in [
        " " + line.split(". ", 1)[1] for line in mcf_doc.query.split("\n")[1:5]
    ]
    assert [m.metric_name for m in arc_cf.config.metrics] == ["acc", "acc_norm", "gold_bpb", "normalized_mc_prob_norm"]
    assert [m.metric_name for m in arc_mcf.config.metrics] == ["acc", "normalized_mc_prob", "gold_margin"]
    assert all(len(task.get_docs(5)) == 5 for task in tasks.values())


def test_winogrande_parts():
    assert winogrande_parts("The cup fell because _ was wet.", "it", "the table") == (
        "The cup fell because ",
        ["it  was wet.", "the table  was wet."],  # lighteval's adapter joins with a space: two of them
    )
    assert winogrande_parts("No blank here.", "a", "b") is None
    assert winogrande_parts("_ starts it.", "a", "b") is None


# --- against lighteval's own templates -----------------------------------------------------------


def _lighteval():
    pytest.importorskip("lighteval")
    from lighteval.tasks.templates import continuation, hellaswag, multichoice
    from lighteval.tasks.templates.utils import formulation
    from lighteval.utils.language import Language

    return multichoice, continuation, hellaswag, formulation, Language.ENGLISH


def _their_prompt(name: str, form: Formulation):
    """lighteval's template prompt function for the same fields as ours."""
    multichoice, continuation, hellaswag, formulation, english = _lighteval()
    theirs = formulation.CFFormulation() if form is Formulation.CF else formulation.MCFFormulation()
    config = next(c for c in TASKS_TABLE if c.name == name)
    fields = config.prompt_function.fields

    def adapted(line):
        values = fields(line)
        if values is None:
            return None
        values = dict(values)
        values["gold_idx"] = values.pop("gold")
        if "endings" in values:
            values["continuations"] = values.pop("endings")
        return values

    if name.startswith("hellaswag"):
        return config, hellaswag.get_hellaswag_prompt_function(english, adapted, theirs)
    if name.startswith("winogrande"):
        try:  # lighteval's own adapter, when its dependencies (langcodes) are installed
            from functools import partial

            from lighteval.tasks.multilingual.adapters import winogrand_adapter

            return config, continuation.get_continuation_prompt_function(
                english, partial(winogrand_adapter, english), theirs
            )
        except ImportError:
            return config, continuation.get_continuation_prompt_function(english, adapted, theirs)
    return config, multichoice.get_mcq_prompt_function(english, adapted, theirs)


def _rows(config):
    from lighteval_nanotron.tasks.lighteval_task import LightevalTask

    task = LightevalTask(config)
    dataset = task.download_dataset_worker(task)
    return [dict(row) for split in (config.evaluation_splits[0], config.few_shots_split) for row in dataset[split]]


@pytest.mark.parametrize("form", list(Formulation))
@pytest.mark.parametrize("pattern", [*BENCHMARK_TASKS, "mmlu_eng_{f}:anatomy", "mmlu_eng_{f}:virology"])
def test_docs_equal_lightevals_templates(bundled, pattern, form):
    name = pattern.format(f=form.value)
    config, theirs = _their_prompt(name, form)
    rows = _rows(config)
    assert len(rows) >= 20
    compared = 0
    for row in rows:
        ours, expected = config.prompt_function(row, name), theirs(row, name)
        if expected is None:
            assert ours is None
            continue
        compared += 1
        assert ours.query == expected.query
        assert ours.choices == expected.choices
        assert ours.gold_index == expected.gold_index
        assert ours.instruction == expected.instruction
        assert ours.unconditioned_query == expected.unconditioned_query
    assert compared >= 20
