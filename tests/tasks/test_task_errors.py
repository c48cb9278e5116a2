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
        PromptFunctionError, match="custom\\|toy_bad_prompt\\|0.*failing_prompt.*row 2 of split 'validation'.*KeyError"
    ):
        task.get_docs()


def test_prompt_function_must_return_a_doc(toy_task):
    task = toy_task("custom|toy_mc:train_fs|0")
    task.formatter = lambda line, name: {"query": "x"}
    with pytest.raises(PromptFunctionError, match="returned dict on row 0"):
        task.eval_docs()


def test_missing_split_and_dataset_of_a_registered_task(toy_task):
    with pytest.raises(DatasetLoadError, match="custom\\|toy_missing_split\\|0.*split 'nope'"):
        toy_task("toy_missing_split").get_docs()
    with pytest.raises(DatasetLoadError, match="custom\\|toy_missing_data\\|0.*toy/absent"):
        toy_task("toy_missing_data").get_docs()


def test_all_errors_share_the_base_class():
    for error in (CustomTasksError, DatasetLoadError, PromptFunctionError, TaskSpecError, UnknownTaskError):
        assert issubclass(error, LightevalNanotronError)
