"""`EvaluationOptions`: every option the training hook's section and the `eval` command share.

Each option is declared once, here (or in the groups it includes: `TokenizationOptions`,
`TrackingOptions`), with its docstring and its check. The hook's `EvaluationConfig` and `eval`'s
`CheckpointEvalConfig` include it and add only their own fields; the `eval` flags
(`options.flags`), the engine and tracking settings (`lighteval_nanotron.setup`), the lighteval
field mapping (`lighteval_compat.fields`, checked against these fields by a test) and docs/options.md
(`options.reference`) are derived from it.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.heldout import DEFAULT_HELD_OUT_TOKENS, HeldOutSpec, held_out_specs
from lighteval_nanotron.options.base import as_list, choices, path, same_scores, scores
from lighteval_nanotron.options.batching import BatchingOptions
from lighteval_nanotron.options.tokenization import TokenizationOptions
from lighteval_nanotron.options.tracking import TrackingOptions
from lighteval_nanotron.requests import GenerationParameters
from lighteval_nanotron.tasks.fewshot import FewShotDraws
from lighteval_nanotron.tasks.spec import read_task_list


@dataclass(kw_only=True)
class EvaluationOptions(TrackingOptions, TokenizationOptions, BatchingOptions):
    """What to evaluate and how. Every field but `tasks` (or `held_out`) is optional."""

    tasks: Union[str, List[str]] = field(default="", metadata=scores("data"))
    """Task specs `suite|task|num_fewshot`: a string of specs separated by commas or line breaks, a
    list, or a file of specs (one or more a line, `#` comments), e.g.
    `lighteval|arc:easy|0,lighteval|piqa|0`. May be empty when `held_out` names domains."""

    held_out: Optional[Union[Dict[str, Any], List[str]]] = field(
        default=None,
        metadata={
            **scores("data"),
            "flag": "--held-out",
            "repeat": True,
            "metavar": "NAME=PATH",
            "examples": ("web=/data/web", "code=/data/code"),
        },
    )
    """Held-out domains, scored for loss (nats per token), perplexity and bits per byte: `NAME=PATH`
    (the flag, repeatable) or `{name: path}` / `{name: {path, tokens, text_column, split, subset, seed}}`
    (the section); a path is a Nanoset folder, a jsonl/parquet file or folder with a text column, or a
    dataset name. Results `heldout|<name>`; see docs/held_out.md."""

    held_out_tokens: int = field(default=DEFAULT_HELD_OUT_TOKENS, metadata=scores("data"))
    """Target tokens scored per held-out domain at each evaluation (a fixed subset, the same every time)."""

    held_out_sequence_length: Optional[int] = field(default=None, metadata=scores("data"))
    """Tokens per held-out window's input. Unset: the training's `tokens.sequence_length` (for `eval`,
    the checkpoint's `config.yaml`), else the model's positions."""

    custom_tasks: Optional[str] = field(default=None, metadata=path(**scores("data")))
    """A Python file or module that defines a `TASKS_TABLE` of extra tasks (lighteval task files
    run unchanged)."""

    data_dirs: Optional[Union[str, List[str]]] = field(
        default=None, metadata=scores("data", flag="--data-dir", repeat=True)
    )
    """Where task datasets are read from, searched before `$LIGHTEVAL_NANOTRON_DATA_DIRS`: local
    folders, or `bundled` for the slices shipped with the package. Unset: that variable, then the
    Hugging Face cache."""

    max_samples: Optional[int] = field(default=None, metadata=scores("data"))
    """At most this many docs per task (a fixed subset, the same at every run). Unset: all docs."""

    fewshot_draws: Optional[str] = field(default=None, metadata=choices(FewShotDraws.names(), **scores()))
    """Few-shot draws for every task: `lighteval` (lighteval 0.11's, comparable with its numbers)
    or `per_doc` (a doc's examples depend on that doc only). Unset: each task's own (`lighteval`
    for lighteval's suites, `per_doc` for custom tasks); see docs/tasks.md."""

    use_chat_template: bool = field(default=False, metadata=scores("measured"))
    """Render prompts with the tokenizer's chat template (few-shot examples as user/assistant
    turns). A tokenizer without a chat template fails at setup, before step 1 or the model build."""

    system_prompt: Optional[str] = field(default=None, metadata=scores("measured"))
    """A system prompt: the system turn with `use_chat_template`, else the first paragraph of
    every prompt."""

    generation: Optional[Dict[str, Any]] = field(
        default=None, metadata=scores("measured", flags_of=GenerationParameters)
    )
    """Decoding of generative tasks: any of `temperature` (0: greedy, the default), `top_k`,
    `top_p`, `num_samples`, `seed`. A task's own `generation_parameters` override them."""

    bootstrap_iters: Optional[int] = field(default=None, metadata=scores())
    """Bootstrap resamples behind the standard error of each metric that is not a mean (F1, MCC,
    perplexities, ...; means get the analytic one). Fewer make an in-loop evaluation of such
    metrics cheaper, more make the error bars steadier. Unset: 1000, as lighteval."""

    model_name: Optional[str] = field(default=None, metadata=same_scores())
    """Name in the results paths (`results/<model_name>/<step>/`). Unset: the training config's
    `general.project/general.run` (for `eval`, the checkpoint's `config.yaml`: its
    `lighteval_nanotron.model_name` first; a converted model `converted/<name>`; else the folder
    name), so the hook and `eval` of one run write to the same place."""

    progress_bar: bool = field(default=True, metadata=same_scores(flag="--no-progress"))
    """Progress of each evaluation on the reporting rank, advanced per micro-batch (docs done of the
    total, docs/s, time left): a bar that stays on screen when stderr is a terminal, and lines in the
    log every `progress_interval_s` (the hook with the `log` logger; `eval` when stderr is not a
    terminal)."""

    progress_interval_s: Union[int, float] = field(default=30, metadata=same_scores())
    """Seconds between two progress lines in the log during one evaluation (none for a shorter one)."""

    failure_timeout_s: Union[int, float] = field(default=1800, metadata=same_scores())
    """Seconds any wait on another rank may take (a collective, a pipeline transfer, the agreement
    on how a step went) before the evaluation stops with an `EvaluationError`: a stalled or dead
    rank becomes an error instead of a hang."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tasks = read_task_list(self.tasks)
        if not self.tasks and not self.held_out:
            raise ConfigError(
                f"{self.named('tasks')} is empty: set it to task specs, e.g. 'lighteval|arc:easy|0,lighteval|piqa|0' "
                f"(or give {self.named('held_out')} domains)."
            )
        self.check_positive("held_out_tokens", "(tokens per domain), e.g. 1000000")
        self.check_positive("held_out_sequence_length", "or remove it for the training's")
        try:
            held_out_specs(self.held_out, self.held_out_tokens)
        except ConfigError as error:
            raise ConfigError(f"{self.named('held_out')}: {error}") from error
        self.data_dirs = as_list(self.data_dirs)
        self.check_positive("max_samples", "or remove it to evaluate every doc")
        self.check_not_blank("system_prompt", "give a prompt or remove it")
        try:
            GenerationParameters.from_dict(self.generation)
        except ConfigError as error:
            raise ConfigError(f"{self.named('generation')}: {error}") from error
        if self.bootstrap_iters is not None and self.bootstrap_iters < 2:
            raise ConfigError(f"{self.named('bootstrap_iters')} is {self.bootstrap_iters}: set it to 2 or more.")
        if self.progress_interval_s < 0:
            interval = self.progress_interval_s
            raise ConfigError(f"{self.named('progress_interval_s')} is {interval}: give 0 seconds or more.")
        self.progress_interval_s = float(self.progress_interval_s)
        self.check_positive("failure_timeout_s", "(seconds), e.g. 1800", kind="number")
        self.failure_timeout_s = float(self.failure_timeout_s)

    @property
    def held_out_specs(self) -> List[HeldOutSpec]:
        """The held-out domains, each with its budget (`held_out_tokens` where it gives none)."""
        return held_out_specs(self.held_out, self.held_out_tokens)
