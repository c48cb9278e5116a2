"""`PipelineSettings`: everything `EvaluationPipeline.prepare` takes besides the model and the tasks.

One object, as lighteval's `PipelineParameters`: a new pipeline setting is a field here, not a
keyword threaded through every caller. The hook and `eval` build it in one place,
`PipelineSettings.from_options`, where each field takes the option of its name: an option the
pipeline reads is declared in `EvaluationOptions` and reaches the pipeline without being copied by
name (a test checks that the names and defaults agree).

    settings = PipelineSettings(max_samples=100, model_name="my-run")
    pipeline = EvaluationPipeline.prepare(model, "lighteval|arc:easy|0", settings)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lighteval_nanotron.errors import ConfigError

if TYPE_CHECKING:
    from lighteval_nanotron.heldout import HeldOutSpec
    from lighteval_nanotron.options import EvaluationOptions
    from lighteval_nanotron.pipeline.pipeline import TaskDocs
    from lighteval_nanotron.pipeline.progress import ProgressLog
    from lighteval_nanotron.requests.held_out import HeldOutSet
    from lighteval_nanotron.tasks import PromptManager

RUNTIME = ("prompt_manager", "docs", "progress_log")
"""The fields that are objects of the running program, not options: the caller gives them."""


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """How a pipeline is prepared and run. Every field is optional: `PipelineSettings()` evaluates
    every doc of each task, as the hook and `eval` do by default."""

    max_samples: int | None = None
    """At most this many docs per task (a fixed subset, the same at every run); None: all docs."""

    custom_tasks: str | Path | ModuleType | None = None
    """A `.py` file, module name or module with a `TASKS_TABLE` of extra tasks."""

    fewshot_draws: str | None = None
    """`lighteval` or `per_doc` for every task; None keeps each task's own (its config's
    `fewshot_draws`, else `lighteval` for lighteval's suites)."""

    model_name: str | None = None
    """Name in results and output paths; None: `model.model_name`, else "model"."""

    bootstrap_iters: int | None = None
    """Bootstrap resamples for non-mean metrics' standard errors; None: 1000, as lighteval."""

    held_out_specs: Sequence[HeldOutSpec | HeldOutSet] = field(default_factory=list)
    """Held-out domains (`heldout.HeldOutSpec`), read and tokenized at `prepare`, once for the mesh,
    or their `HeldOutSet`s already built on every rank; the tasks may then be empty."""

    held_out_sequence_length: int | None = None
    """Tokens per held-out window's input (the training's sequence length); None: the model's positions."""

    progress_bar: bool = True
    """Progress of each evaluation on the reporting rank (docs done, docs/s, ETA): a bar when stderr
    is a terminal, advanced as its micro-batches end, and the `progress_log` lines; off: neither."""

    progress_interval_s: float = 30.0
    """Seconds between two `progress_log` lines during one evaluation (none for a shorter one)."""

    prompt_manager: PromptManager | None = None
    """How docs become prompts in the details when the model does not return its input; None: the
    model's `prompt_fn`, else plain text."""

    docs: Mapping[str, TaskDocs] | None = None
    """The tasks' docs when already built (`pipeline.build_docs`); None: built at `prepare`, once for
    the whole mesh (the model's `computed_once`)."""

    progress_log: ProgressLog | None = None
    """Where progress lines go on the reporting rank (e.g. a logger's `info`); None: no lines."""

    def __post_init__(self) -> None:
        if self.max_samples is not None and self.max_samples < 1:
            raise ConfigError(f"max_samples={self.max_samples}: use a positive number, or None for every doc.")

    @classmethod
    def from_options(cls, options: EvaluationOptions, **given: Any) -> PipelineSettings:
        """The settings of the hook's or `eval`'s `options`: each field but the runtime objects takes
        the option of its name; `given` sets the runtime objects and the values the caller resolved
        (the model name, the training's sequence length, held-out sets already built)."""
        taken = {name: getattr(options, name) for name in (f.name for f in fields(cls)) if name not in RUNTIME}
        return cls(**{**taken, **given})
