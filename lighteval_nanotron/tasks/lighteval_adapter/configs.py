"""lighteval's task configs (0.11 to 0.13) and prompt functions as this project's.

Every field of lighteval's `LightevalTaskConfig` is accounted for:

- copied by name: the dataset (`hf_repo`, `hf_subset`, `hf_revision`, `hf_filter`,
  `hf_avail_splits`, `hf_data_files`), splits, few-shot settings, generation settings,
  `num_samples`, `suite` (0.11; a config without one gets `custom`, or the catalogue's suite),
  `must_remove_duplicate_docs`, `num_fewshots`, `version`;
- adapted: `prompt_function` (wrapped to return this project's `Doc`; None still drops a row),
  `metrics` (`metrics.adapt_metric`);
- ignored, with a note by the caller (`inspect_only_fields`): lighteval 0.12+'s inspect-ai fields
  `solver`, `scorer`, `sample_fields`, `sample_to_fewshot`, `filter`. They define lighteval's other
  evaluation (`lighteval eval`, on inspect-ai samples, with its own prompts, scorer and few-shot
  examples); lighteval's prompt-function backends (accelerate, vLLM, Nanotron) ignore them too,
  and `filter` applies to inspect-ai samples, not to dataset rows (rows are dropped by
  `hf_filter` or by a prompt function returning None). A config that only has that evaluation
  (no prompt function) is refused;
- without effect: lighteval 0.11's `trust_dataset` (`datasets` 4 runs no loading scripts);
- refused when set: `generation_grammar` (structured generation), and any field this adapter
  does not know (a later lighteval) whose value is not lighteval's default;
- left to the task: `original_num_docs`, `effective_num_docs`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc
from lighteval_nanotron.tasks.config import LightevalTaskConfig
from lighteval_nanotron.tasks.lighteval_adapter.installed import import_lighteval
from lighteval_nanotron.tasks.lighteval_adapter.metrics import adapt_metric

COPIED_FIELDS = (
    "name",
    "hf_repo",
    "hf_subset",
    "hf_revision",
    "hf_filter",
    "hf_avail_splits",
    "hf_data_files",
    "evaluation_splits",
    "few_shots_split",
    "few_shots_select",
    "generation_size",
    "stop_sequence",
    "num_samples",
    "suite",
    "must_remove_duplicate_docs",
    "num_fewshots",
    "truncate_fewshots",
    "version",
)
INSPECT_ONLY_FIELDS = ("solver", "scorer", "sample_fields", "sample_to_fewshot", "filter")
NO_EFFECT_FIELDS = ("trust_dataset",)
"""lighteval 0.11's `trust_dataset` (run a dataset's loading script): `datasets` 4 runs no scripts, here as in
lighteval, so it changes nothing."""
_ADAPTED_FIELDS = ("prompt_function", "metrics", "generation_grammar")
_FILLED_BY_TASK = ("original_num_docs", "effective_num_docs")
_DOC_FIELDS = (
    "query",
    "choices",
    "gold_index",
    "instruction",
    "images",
    "specific",
    "unconditioned_query",
    "original_query",
    "fewshot_sorting_class",
)


def adapt_doc(doc: Any) -> Doc | None:
    """A lighteval `Doc` as this project's (None, or lighteval's other "skip" value `[]`, gives None)."""
    if doc is None or (isinstance(doc, list) and not doc):
        return None
    if isinstance(doc, Doc):
        return doc
    values = {name: getattr(doc, name, None) for name in _DOC_FIELDS}
    # an empty instruction stays one: lighteval's prompt shows it (a leading blank part) and strips the query
    values["original_query"] = values["original_query"] or None
    return Doc(**values)


class AdaptedPrompt:
    """A lighteval prompt function returning this project's `Doc`s (named like the user's function)."""

    def __init__(self, prompt_function: Callable[[dict, str], Any]):
        self.prompt_function = prompt_function
        functools.update_wrapper(self, prompt_function)

    def __call__(self, line: dict, task_name: str) -> Doc | None:
        return adapt_doc(self.prompt_function(line, task_name))


def inspect_only_fields(config: Any) -> list[str]:
    """The inspect-ai fields a lighteval config sets (ignored here; see the module docstring)."""
    return [name for name in INSPECT_ONLY_FIELDS if getattr(config, name, None) is not None]


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _unknown_fields_set(config: Any) -> list[str]:
    known = {*COPIED_FIELDS, *INSPECT_ONLY_FIELDS, *NO_EFFECT_FIELDS, *_ADAPTED_FIELDS, *_FILLED_BY_TASK}
    names = []
    for field in dataclasses.fields(config):
        if field.name in known:
            continue
        try:
            is_default = getattr(config, field.name) == _default(field)
        except Exception:  # a value that does not compare (an array, ...) is not the default
            is_default = False
        if not is_default:
            names.append(field.name)
    return names


def adapt_task_config(config: Any, suite: Sequence[str] | None = None) -> LightevalTaskConfig:
    """A lighteval `LightevalTaskConfig` as this project's. `suite`, when given, names its suites (the
    catalogue's); else the config's own `suite` (lighteval 0.11), else `custom`."""
    lighteval = import_lighteval()
    where = f"lighteval task config {getattr(config, 'name', '?')!r}"
    unknown = _unknown_fields_set(config)
    if unknown:
        raise ConfigError(
            f"{where}: field(s) {', '.join(unknown)} of lighteval {lighteval.version} have no counterpart here "
            "(this project reads lighteval 0.11 to 0.13 task configs); leave them at lighteval's default."
        )
    if config.prompt_function is None:
        fields_set = inspect_only_fields(config)
        raise ConfigError(
            f"{where} has no prompt_function: it only defines lighteval's inspect-ai evaluation "
            f"({', '.join(fields_set) or 'no prompt function'}), which this project does not run. Give it a "
            "prompt function and metrics (what lighteval's accelerate, vLLM and Nanotron backends evaluate)."
        )
    if getattr(config, "generation_grammar", None) is not None:
        raise ConfigError(
            f"{where}: generation_grammar (structured generation) is not supported by the Nanotron model."
        )
    values = {name: getattr(config, name) for name in COPIED_FIELDS if hasattr(config, name)}
    if suite is not None:
        values["suite"] = list(suite)
    # as lighteval's task reads it (`config.hf_avail_splits or []`): none listed, the few-shot examples
    # come from the evaluation splits, not from a `train` split the file never named
    values["hf_avail_splits"] = list(values.get("hf_avail_splits") or [])
    return LightevalTaskConfig(
        prompt_function=AdaptedPrompt(config.prompt_function),
        metrics=[adapt_metric(metric, where) for metric in config.metrics],
        **values,
    )
