"""`LightevalTaskConfig`: everything that defines a task, with lighteval's fields and defaults."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import Doc, GenerationParameters, SamplingMethod
from lighteval_nanotron.tasks.fewshot import FewShotDraws, FewShotSelection


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    return list(value)


def _own_metric(metric: Any, task_name: str) -> Any:
    """A metric of lighteval's (its `Metrics` member or `Metric`) given to this project's config is
    computed by lighteval's own code, as in a lighteval task file (`lighteval_adapter.adapt_metric`)."""
    from lighteval_nanotron.tasks.lighteval_adapter.installed import is_lighteval_object

    if not is_lighteval_object(metric):
        return metric
    from lighteval_nanotron.tasks.lighteval_adapter.metrics import adapt_metric

    return adapt_metric(metric, f"task config {task_name!r}")


@dataclass
class LightevalTaskConfig:
    """Configuration of one evaluation task (same fields and defaults as lighteval 0.11).

    `metrics` holds metric objects from `lighteval_nanotron.metrics`. Sequence fields accept a
    single string or any sequence and are stored as lists.
    """

    name: str
    """Short task name, e.g. `arc:easy`; the part before `:` names its superset."""
    prompt_function: Callable[[dict, str], Doc | None]
    """`fn(row, task_name) -> Doc | None` turns a dataset row into a `Doc` (None drops the row)."""
    hf_repo: str
    """Hub dataset repository, or a local folder."""
    hf_subset: str
    """Dataset configuration name (`default` when the dataset has none)."""
    metrics: Sequence[Any]
    """Metric objects; their categories decide how the model is queried."""

    hf_revision: str | None = None
    """Dataset revision (branch, tag or commit) on the Hub; None is the latest."""
    hf_data_files: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None
    """The dataset's files, as `data_files` of `datasets.load_dataset(hf_repo, hf_subset)` (e.g.
    `hf_repo="json"` and a local JSON Lines file, or a mapping split -> files); data dirs are then
    not searched."""
    hf_filter: Callable[[dict], bool] | None = None
    """Keep only the rows for which this returns True."""
    hf_avail_splits: Sequence[str] = field(default_factory=lambda: ["train", "validation", "test"])
    """Splits the dataset has; used to find a few-shot split."""

    evaluation_splits: Sequence[str] = field(default_factory=lambda: ["validation"])
    """Splits whose rows are evaluated, concatenated in this order."""
    few_shots_split: str | None = None
    """Split few-shot examples come from; None picks the first train/dev/valid split not evaluated."""
    few_shots_select: str | None = None
    """One of balanced (default), random, sequential, random_sampling_from_train, random_sampling."""
    fewshot_draws: str | None = None
    """`lighteval` (lighteval 0.11's draws, comparable with its numbers) or `per_doc` (a doc's
    examples depend only on that doc); None: `lighteval` for lighteval's suites, else `per_doc`."""

    generation_size: int | None = None
    """Maximum number of new tokens for generative metrics."""
    generation_grammar: Any | None = None
    """Grammar for structured generation; kept for API compatibility, unused by the Nanotron model."""
    stop_sequence: Sequence[str] | None = None
    """Strings that end a generation."""
    num_samples: list[int] | None = None
    """Numbers of samples to generate per doc; the largest one (and at least 1, and what the
    metrics need: `maj@k` k, `pass@k` n) is used."""
    generation_parameters: GenerationParameters | dict[str, Any] | None = None
    """This task's decoding settings (temperature, top_k, top_p, num_samples, seed), overriding
    the run's field by field. None: the run's (greedy unless the run samples)."""

    suite: Sequence[str] = field(default_factory=lambda: ["custom"])
    """Suites the task is registered in; the first one names it in results."""

    original_num_docs: int = -1
    """Number of docs in the evaluation splits (filled in when docs are built)."""
    effective_num_docs: int = -1
    """Number of docs actually evaluated (filled in by `get_docs`)."""

    must_remove_duplicate_docs: bool = False
    """Drop eval docs whose query, choices, gold and instruction repeat an earlier doc."""

    num_fewshots: int = 0
    """Number of few-shot examples per doc (set from the task spec)."""
    truncate_fewshots: bool = False
    """Allow the model layer to drop few-shot examples when the context is too long."""

    version: int = 0
    """Bump when the dataset or the prompt changes."""

    def __post_init__(self) -> None:
        self.metrics = [_own_metric(metric, self.name) for metric in _as_list(self.metrics)]
        self.hf_avail_splits = _as_list(self.hf_avail_splits)
        self.evaluation_splits = _as_list(self.evaluation_splits)
        self.suite = _as_list(self.suite)
        if isinstance(self.few_shots_split, (list, tuple)) and len(self.few_shots_split) == 1:
            self.few_shots_split = self.few_shots_split[0]  # ["dev"], as lighteval's Arabic and Turkic tasks write it
        if isinstance(self.hf_data_files, tuple):
            self.hf_data_files = list(self.hf_data_files)
        if self.stop_sequence is not None:
            self.stop_sequence = _as_list(self.stop_sequence)
        if self.num_samples is not None:
            self.num_samples = [int(n) for n in _as_list(self.num_samples)]
        if self.generation_parameters is not None:
            self.generation_parameters = GenerationParameters.from_dict(self.generation_parameters)
        self._validate()

    def _validate(self) -> None:
        where = f"task config {self.name!r}"
        self._check_switches_and_counts(where)
        if not self.name or "|" in self.name or "@" in self.name or "," in self.name:
            raise ConfigError(f"{where}: name must be non-empty and contain none of '|', '@', ','.")
        if not callable(self.prompt_function):
            raise ConfigError(f"{where}: prompt_function must be a callable fn(row, task_name) -> Doc.")
        if not self.suite or any(not s or "|" in s for s in self.suite):
            raise ConfigError(f"{where}: suite must be a non-empty list of names without '|'.")
        self._check_splits(where)
        if self.few_shots_select is not None and self.few_shots_select not in FewShotSelection.names():
            raise ConfigError(
                f"{where}: few_shots_select={self.few_shots_select!r} is not one of "
                f"{', '.join(FewShotSelection.names())}."
            )
        if self.fewshot_draws is not None and self.fewshot_draws not in FewShotDraws.names():
            raise ConfigError(
                f"{where}: fewshot_draws={self.fewshot_draws!r} is not one of {', '.join(FewShotDraws.names())} "
                "(or None for the suite's default)."
            )
        if int(self.num_fewshots) < 0:
            raise ConfigError(f"{where}: num_fewshots must be >= 0, got {self.num_fewshots}.")
        if self.hf_filter is not None and not callable(self.hf_filter):
            raise ConfigError(f"{where}: hf_filter must be a callable fn(row) -> bool.")
        self._check_metric_names(where)
        self._check_generation_size(where)
        self._check_stop_sequences(where)

    def _check_splits(self, where: str) -> None:
        """Split names are strings (`few_shots_split` is one split, not a list of several); an
        evaluation split named twice would evaluate each of its docs twice (their weight and the
        standard error wrong). `hf_avail_splits` only says where few-shot examples may come from:
        a name listed twice there changes nothing."""
        if not self.evaluation_splits:
            raise ConfigError(f"{where}: evaluation_splits must name at least one split.")
        if self.few_shots_split is not None and not isinstance(self.few_shots_split, str):
            raise ConfigError(
                f"{where}: few_shots_split={self.few_shots_split!r} must be one split name (a string), as in "
                'lighteval, e.g. few_shots_split="dev"; or None for the first train/dev/valid split.'
            )
        splits = self.evaluation_splits
        if any(not isinstance(split, str) for split in splits) or len(set(splits)) < len(splits):
            raise ConfigError(
                f"{where}: evaluation_splits={splits!r} must name each split once, as a string (a split named "
                "twice would have its docs evaluated twice)."
            )
        if any(not isinstance(split, str) for split in self.hf_avail_splits):
            raise ConfigError(f"{where}: hf_avail_splits={self.hf_avail_splits!r} must be split names (strings).")

    def _check_switches_and_counts(self, where: str) -> None:
        """A switch is true or false and a count an integer: `must_remove_duplicate_docs="false"` (a
        truthy string) would drop docs, `num_fewshots=True` would be 1 (`generation_size`:
        `_check_generation_size`)."""
        for name in ("must_remove_duplicate_docs", "truncate_fewshots"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{where}: {name}={getattr(self, name)!r}: give True or False.")
        counts = {"num_fewshots": self.num_fewshots, "version": self.version}
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where}: {name}={value!r}: give an integer.")

    def _check_stop_sequences(self, where: str) -> None:
        """An empty stop string is in every text (each generation would stop after one token); a
        stop that is not a string fails in the middle of generation."""
        bad = [stop for stop in self.stop_sequence or [] if not isinstance(stop, str) or not stop]
        if bad:
            raise ConfigError(
                f"{where}: stop_sequence {self.stop_sequence!r} holds {bad[0]!r}: each stop sequence must be a "
                "non-empty string (an empty one would end every generation after its first token); drop it."
            )

    def _check_generation_size(self, where: str) -> None:
        """A generative metric with generation_size <= 0 would silently get one token; a size that is
        not a whole number ("32", 5.5) would fail in the middle of generation."""
        size = self.generation_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral)):
            raise ConfigError(f"{where}: generation_size={size!r} must be a whole number of new tokens, or None.")
        generative = any(getattr(m, "category", None) == SamplingMethod.GENERATIVE for m in self.metrics)
        if generative and self.generation_size is not None and int(self.generation_size) <= 0:
            raise ConfigError(
                f"{where}: generation_size={self.generation_size} with a generative metric: give the maximum "
                "number of new tokens (>= 1), or None for the model's default."
            )

    def _check_metric_names(self, where: str) -> None:
        """Two metrics writing the same result key would silently overwrite each other."""
        seen: set[str] = set()
        for metric in self.metrics:
            names = metric.metric_name if isinstance(metric.metric_name, list) else [metric.metric_name]
            for name in names:
                if name in seen:
                    raise ConfigError(
                        f"{where}: two metrics report {name!r} (for example two normalizations that get "
                        "the same lighteval name): keep one, or give one a distinct metric_name."
                    )
                seen.add(name)

    @property
    def full_name(self) -> str:
        """`suite|name|num_fewshots`, the task's key in results."""
        return f"{self.suite[0]}|{self.name}|{self.num_fewshots}"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (callables by name, metrics by metric name), for results files."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "metrics":
                value = [getattr(m, "metric_name", repr(m)) for m in value]
            elif isinstance(value, GenerationParameters):
                value = value.as_dict()
            elif callable(value):
                value = getattr(value, "__qualname__", repr(value))
            elif value is not None and not isinstance(value, (str, int, float, bool, list, dict)):
                value = repr(value)
            out[f.name] = value
        out["full_name"] = self.full_name
        return out
