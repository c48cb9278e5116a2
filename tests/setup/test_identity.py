"""A step's identity is derived from the options' declarations: every option that reaches the engine
or the pipeline says whether it changes scores, and two values of one that does are recorded apart
and never mixed in one results file (refused, and nothing counted done across them)."""

import dataclasses
import typing

import pytest

from lighteval_nanotron.errors import TrackingError
from lighteval_nanotron.models.engine import EngineConfig
from lighteval_nanotron.options import EvaluationOptions, TrackingOptions
from lighteval_nanotron.options.base import SCORES, declares_scores
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.requests.doc import DOCS_DIGEST, docs_digest
from lighteval_nanotron.setup.engine import engine_config
from lighteval_nanotron.setup.finished_steps import finished_steps
from lighteval_nanotron.setup.step import run_identity
from lighteval_nanotron.tracking.results_file import evaluated_tasks, merge_results, settings_conflict
from tests.tracking.helpers_tracking import make_result

TASK, OTHER = "lighteval|arc:easy|0", "lighteval|piqa|0"
MODEL_INPUTS = ("dtype", "tokenizer")
"""`eval`'s own options that reach the model (the others choose checkpoints, layout and watching)."""


def _reaching() -> list[tuple[str, dataclasses.Field]]:
    tracking = {field.name for field in dataclasses.fields(TrackingOptions)}
    fields = [("EvaluationOptions", f) for f in dataclasses.fields(EvaluationOptions) if f.name not in tracking]
    fields += [("EngineConfig", f) for f in dataclasses.fields(EngineConfig)]
    own = {field.name: field for field in dataclasses.fields(CheckpointEvalConfig)}
    return fields + [("CheckpointEvalConfig", own[name]) for name in MODEL_INPUTS]


def test_every_option_that_reaches_the_engine_or_the_pipeline_says_whether_it_changes_scores():
    missing = [f"{owner}.{field.name}" for owner, field in _reaching() if not declares_scores(field)]
    assert not missing, f"declare scores(...) or same_scores() in these fields' metadata: {missing}"


BY_VALUE = sorted({(field.name, owner) for owner, field in _reaching() if field.metadata.get(SCORES) == "value"})


def _two_values(owner: type, name: str) -> tuple:
    """The option's default and another value its check accepts."""
    field = next(f for f in dataclasses.fields(owner) if f.name == name)
    default = field.default
    hint = typing.get_type_hints(owner)[name]
    if "choices" in field.metadata:
        return default, next(choice for choice in field.metadata["choices"] if choice != default)
    if bool in typing.get_args(hint) or hint is bool:
        return default, not default
    if int in typing.get_args(hint) or hint is int:
        return default, 7 if default is None else default + 1
    raise AssertionError(f"{owner.__name__}.{name}: teach _two_values a second value of {hint}")


def _identity(owner: str, name: str, value: object) -> dict:
    if owner == "EvaluationOptions":
        options = EvaluationOptions(tasks=TASK, **{name: value})
        return run_identity(options, engine_config(options), {}, "float32")
    return run_identity(EvaluationOptions(tasks=TASK), EngineConfig(**{name: value}), {}, "float32")


def _step_file(identity: dict) -> dict:
    content = make_result(step=10).to_dict()
    content["results"] = {TASK: {"acc": 0.5, "acc_stderr": 0.1}}
    content["config_tasks"] = {TASK: {DOCS_DIGEST: "d" * 64}}
    content["config_general"].update(identity=identity, max_samples_by_task={TASK: None})
    return content


@pytest.mark.parametrize(("name", "owner"), BY_VALUE)
def test_two_values_of_a_score_changing_option_are_recorded_and_never_mixed(name, owner):
    """Walks every option declared `scores("value")`, whichever dataclass declares it."""
    classes = {"EvaluationOptions": EvaluationOptions, "EngineConfig": EngineConfig}
    first, second = (_identity(owner, name, value) for value in _two_values(classes[owner], name))
    assert first[name] != second[name]
    earlier = _step_file(first)
    conflict = settings_conflict(earlier, second, [OTHER])
    assert conflict is not None and f"{name} {first[name]!r} there, {second[name]!r} now" in conflict
    assert settings_conflict(earlier, second, [TASK]) is not None  # the same task again: no replacement either
    later = make_result(step=10).to_dict()
    later["results"] = {OTHER: {"acc": 0.5, "acc_stderr": 0.1}}
    later["config_general"]["identity"] = second
    with pytest.raises(TrackingError, match=name):
        merge_results(earlier, later)
    assert finished_steps({10: evaluated_tasks(earlier, first)}, [TASK], None, {}) == {10}
    assert finished_steps({10: evaluated_tasks(earlier, second)}, [TASK], None, {}) == set()


def test_a_task_is_done_only_on_the_docs_it_was_scored_on():
    docs = [
        Doc(query="2+2=", choices=[" 4", " 5"], gold_index=0),
        Doc(query="1+1=", choices=[" 2", " 3"], gold_index=0),
    ]
    digest = docs_digest(docs)
    others = [
        docs[:1],
        [docs[0], Doc(query="1+1=", choices=[" 2", " 3"], gold_index=1)],
        [docs[0], Doc(query="1+1=", choices=[" 2", " 3"], gold_index=0, fewshot_samples=[docs[0]])],
    ]
    assert len({digest, *map(docs_digest, others)}) == 4
    earlier = _step_file({})
    earlier["config_tasks"][TASK][DOCS_DIGEST] = digest
    done = {10: evaluated_tasks(earlier)}
    assert finished_steps(done, [TASK], None, {TASK: digest}) == {10}
    assert finished_steps(done, [TASK], None, {TASK: docs_digest(others[1])}) == set()
