import pytest

from lighteval_nanotron.errors import (
    CustomTasksError,
    DatasetLoadError,
    LightevalNanotronError,
    PromptFunctionError,
    TaskSpecError,
    UnknownTaskError,
)


def test_prompt_function_error_names_task_and_row(toy_task):
    task = toy_task("custom|toy_bad_prompt|0")
    with pytest.raises(
        PromptFunctionError, match="custom\\|toy_bad_prompt\\|0.*failing_prompt.*row 2 .*'validation'.*KeyError"
    ):
        task.get_docs()


def test_prompt_function_must_return_a_doc(toy_task):
    task = toy_task("custom|toy_mc:train_fs|0")
    task.formatter = lambda line, name: {"query": "x"}
    with pytest.raises(PromptFunctionError, match="returned dict on row 0"):
        task.eval_docs()


def test_choices_given_as_a_string_are_refused_naming_the_row(toy_task):
    """A string where a list of choices belongs was scored one character a choice."""
    from lighteval_nanotron.requests import Doc

    task = toy_task("custom|toy_mc:train_fs|0")
    task.formatter = lambda line, name: Doc(query="x", choices=" yes", gold_index=0)
    with pytest.raises(PromptFunctionError, match="choices=' yes' \\(a string\\)"):
        task.eval_docs()


ARC_ROW = {"question": "q", "choices": {"text": "barometer", "label": "ABCD"}, "answerKey": "A"}
HELLASWAG_ROW = {"activity_label": "a", "ctx_a": "b", "ctx_b": "c", "endings": "d", "label": "0"}


@pytest.mark.parametrize(
    "prompt, row, field",
    [
        ("arc", ARC_ROW, "choices.text"),
        ("hellaswag_harness", HELLASWAG_ROW, "endings"),
        ("mmlu_fields[mcf]", {"subject": "s", "question": "q", "choices": "ABCD", "answer": 0}, "choices"),
        ("arc_fields[cf]", ARC_ROW, "choices.text"),
        ("triviaqa", {"question": "q", "answer": {"aliases": "Paris"}}, "answer.aliases"),
        ("arc", {**ARC_ROW, "choices": {"text": ["x", None], "label": ["A", "B"]}}, "choices.text"),
    ],
)
def test_a_data_row_whose_choices_are_not_a_list_of_texts_is_named(tmp_path, prompt, row, field):
    """A built-in prompt reading a data dir's jsonl row: a string of choices was iterated per character."""
    import json
    import re

    from lighteval_nanotron.tasks import Registry, set_data_dirs

    spec = {"arc": "lighteval|arc:easy|0", "hellaswag_harness": "lighteval|hellaswag|0",
            "mmlu_fields[mcf]": "lighteval|mmlu_eng_mcf:anatomy|0", "arc_fields[cf]": "lighteval|arc_eng_cf:easy|0",
            "triviaqa": "lighteval|triviaqa|0"}[prompt]  # fmt: skip
    task = next(iter(Registry(tasks=spec).load_tasks().values()))
    folder = tmp_path.joinpath(task.dataset_path, task.dataset_config_name or "default")
    folder.mkdir(parents=True)
    for split in task.evaluation_split:
        (folder / f"{split}.jsonl").write_text(json.dumps(row) + "\n")
    set_data_dirs([str(tmp_path)])
    with pytest.raises(PromptFunctionError, match=f"'?{re.escape(prompt)}'? .*row 0.*field {field}"):
        task.eval_docs()


def test_missing_split_and_dataset_of_a_registered_task(toy_task):
    with pytest.raises(DatasetLoadError, match="custom\\|toy_missing_split\\|0.*split 'nope'"):
        toy_task("toy_missing_split").get_docs()
    with pytest.raises(DatasetLoadError, match="custom\\|toy_missing_data\\|0.*toy/absent"):
        toy_task("toy_missing_data").get_docs()


def test_all_errors_share_the_base_class():
    for error in (CustomTasksError, DatasetLoadError, PromptFunctionError, TaskSpecError, UnknownTaskError):
        assert issubclass(error, LightevalNanotronError)
