"""Typed errors. Each message names the problem and the fix; they are raised at build time."""


class LightevalNanotronError(Exception):
    """Base class of every error this library raises on purpose."""


class TaskSpecError(LightevalNanotronError, ValueError):
    """A task spec string (`suite|task|k`) is malformed."""


class UnknownTaskError(LightevalNanotronError, KeyError):
    """A task name is not in the registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class CustomTasksError(LightevalNanotronError, ImportError):
    """A custom tasks module cannot be imported or has no `TASKS_TABLE`."""


class DatasetLoadError(LightevalNanotronError, RuntimeError):
    """A task's dataset, subset or split cannot be loaded."""


class PromptFunctionError(LightevalNanotronError, RuntimeError):
    """A task's prompt function raised on a dataset row."""


class MetricError(LightevalNanotronError, ValueError):
    """A metric is unknown, misconfigured, or cannot score a response."""


class ConfigError(LightevalNanotronError, ValueError):
    """A configuration section is invalid."""


class CheckpointError(LightevalNanotronError, RuntimeError):
    """A checkpoint folder is missing, unreadable, or does not match the requested layout."""


class LayoutError(LightevalNanotronError, ValueError):
    """A TP/PP/DP layout does not fit the world size or the model."""


class EvaluationError(LightevalNanotronError, RuntimeError):
    """An evaluation failed on at least one rank; every rank raises it together."""


class EvaluationOutOfMemory(EvaluationError):
    """Not even a micro-batch of one row fits the memory an evaluation is given (every rank raises
    it together); `needed_bytes` is what that row needs (an estimate), `free_bytes` what was free."""

    def __init__(self, message: str, needed_bytes: int, free_bytes: int | None):
        super().__init__(message)
        self.needed_bytes, self.free_bytes = needed_bytes, free_bytes


class TrackingError(LightevalNanotronError, RuntimeError):
    """At least one results logger failed; the others still ran and files already written are intact."""


class UnsupportedModelError(LightevalNanotronError, TypeError):
    """A model class, model config or Nanotron variant that no model family supports."""
