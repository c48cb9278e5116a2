"""The `lighteval_nanotron:` section of a Nanotron training YAML: what to evaluate, when, and where to log.

Every check runs in `__post_init__`, so a bad section fails when the trainer reads its config, on
every rank, before the model is even built.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.requests import GenerationParameters
from lighteval_nanotron.tasks.fewshot import FewShotDraws

KNOWN_LOGGERS = ("json", "details", "tensorboard", "wandb", "log")
WANDB_MODES = ("online", "offline", "disabled")


@dataclass
class EvaluationConfig:
    """Evaluation during training. All fields but `tasks` are optional."""

    tasks: Union[str, List[str]]
    """Task specs, `suite|task|num_fewshot`, as a comma-separated string or a list
    (e.g. `"lighteval|arc:easy|0,lighteval|piqa|0"`)."""

    custom_tasks: Optional[str] = None
    """Python file or module that defines a `TASKS_TABLE` of extra tasks."""

    data_dirs: Optional[Union[str, List[str]]] = None
    """Where task datasets are read from, in order: local folders, or `bundled` for the slices
    shipped with the package. Unset: `LIGHTEVAL_NANOTRON_DATA_DIRS`, then the Hugging Face cache."""

    max_samples: Optional[int] = None
    """At most this many docs per task (a fixed random subset, as in lighteval). Unset: all docs."""

    fewshot_draws: Optional[str] = None
    """Few-shot draws for every task: `lighteval` (lighteval 0.11's, comparable with its numbers)
    or `per_doc` (a doc's examples depend on that doc only). Unset: each task's own (`lighteval`
    for lighteval's suites, `per_doc` for custom tasks). See docs/tasks.md."""

    eval_interval: Optional[int] = None
    """Evaluate after every `eval_interval` training steps (steps divisible by it)."""

    eval_at_checkpoints: bool = False
    """Evaluate right after each checkpoint the trainer saves (`checkpoints.checkpoint_interval`)."""

    eval_at_start: bool = False
    """Evaluate once before the first training step (step 0, or the resumed step)."""

    eval_at_end: bool = True
    """Evaluate once after the last training step (skipped when that step was just evaluated)."""

    tokens_per_batch: int = 8192
    """Token budget of one evaluation batch per data-parallel replica (prompt + continuation, padded)."""

    use_chat_template: bool = False
    """Render prompts with the tokenizer's chat template (few-shot examples as user/assistant
    turns). The tokenizer is checked at setup: one without a chat template fails before step 1."""

    system_prompt: Optional[str] = None
    """A system prompt: the system turn with `use_chat_template`, else the first paragraph of
    every prompt."""

    pairwise_tokenization: bool = False
    """Tokenize context and continuation separately (lighteval's `pairwise_tokenization`);
    default: `context + continuation` together, split at the context's tokens."""

    multichoice_continuations_start_space: Optional[bool] = None
    """Multiple choice (lighteval's option): true puts a space before each choice that lacks one,
    false strips it, unset scores choices as the task writes them."""

    generation: Optional[Dict[str, Any]] = None
    """Decoding settings of generative tasks: any of `temperature` (0: greedy, the default),
    `top_k`, `top_p`, `num_samples`, `seed`. A task's own `generation_parameters` override them."""

    output_dir: str = "eval_results"
    """Folder of the results JSON, the details Parquet files and the TensorBoard events."""

    loggers: List[str] = field(default_factory=lambda: ["json", "details", "tensorboard", "log"])
    """Where metrics go: any of `json`, `details`, `tensorboard`, `wandb`, `log` (Nanotron's log)."""

    tensorboard_prefix: str = "eval"
    """TensorBoard tags are `<prefix>/<task>/<metric>`."""

    wandb_project: Optional[str] = None
    """W&B project when `wandb` is among `loggers`. Unset: the training config's `general.project`."""

    wandb_mode: str = "online"
    """W&B mode: `online`, `offline` (files for a later `wandb sync`) or `disabled`."""

    wandb_entity: Optional[str] = None
    """W&B entity (team or user). Unset: your default entity."""

    wandb_run_name: Optional[str] = None
    """W&B run name. Unset: `<general.project>_<general.run>`."""

    wandb_run_id: Optional[str] = None
    """W&B run id: set it to resume the same W&B run after a restart (`resume="allow"`)."""

    wandb_group: Optional[str] = None
    """W&B run group (e.g. one per sweep)."""

    wandb_tags: Optional[Union[str, List[str]]] = None
    """W&B run tags, a list or a comma-separated string."""

    wandb_dir: Optional[str] = None
    """Folder for W&B's local files. Unset: W&B's default (`./wandb`)."""

    progress_bar: bool = True
    """Progress bars on world rank 0: one over the run's evaluations, one per evaluation (docs
    done, docs/s, ETA). They only show when stderr is a terminal."""

    stop_on_failure: bool = False
    """Stop training when an evaluation fails. Default: log the failure and keep training."""

    failure_timeout_s: int = 600
    """Seconds every rank waits for the others to report how an evaluation went before giving up."""

    model_name: Optional[str] = None
    """Name recorded in results. Unset: `general.project/general.run` of the training config."""

    def __post_init__(self) -> None:
        self.tasks = _as_list(self.tasks)
        if not self.tasks:
            raise ConfigError(
                "lighteval_nanotron.tasks is empty: set it to task specs, e.g. "
                "tasks: 'lighteval|arc:easy|0,lighteval|piqa|0'."
            )
        if self.data_dirs is not None:
            self.data_dirs = _as_list(self.data_dirs)
        _check_positive("max_samples", self.max_samples, "or remove it to evaluate every doc")
        if self.fewshot_draws is not None and self.fewshot_draws not in FewShotDraws.names():
            raise ConfigError(
                f"lighteval_nanotron.fewshot_draws is {self.fewshot_draws!r}: use one of "
                f"{FewShotDraws.names()}, or remove it for each task's default."
            )
        _check_positive("eval_interval", self.eval_interval, "(a number of training steps) or remove it")
        _check_positive("tokens_per_batch", self.tokens_per_batch, "e.g. 8192")
        try:
            GenerationParameters.from_dict(self.generation)
        except ConfigError as error:
            raise ConfigError(f"lighteval_nanotron.generation: {error}") from error
        _check_positive("failure_timeout_s", self.failure_timeout_s, "e.g. 600")
        if not (self.eval_interval or self.eval_at_checkpoints or self.eval_at_start or self.eval_at_end):
            raise ConfigError(
                "lighteval_nanotron never evaluates: set eval_interval, or one of eval_at_checkpoints, "
                "eval_at_start, eval_at_end to true."
            )
        unknown = [name for name in self.loggers if name not in KNOWN_LOGGERS]
        if unknown:
            raise ConfigError(
                f"lighteval_nanotron.loggers has unknown logger(s) {unknown}: use a subset of {list(KNOWN_LOGGERS)}."
            )
        if len(set(self.loggers)) != len(self.loggers):
            raise ConfigError(f"lighteval_nanotron.loggers lists a logger twice ({self.loggers}): list each once.")
        if isinstance(self.wandb_tags, str):
            self.wandb_tags = _as_list(self.wandb_tags)
        if self.wandb_mode not in WANDB_MODES:
            raise ConfigError(f"lighteval_nanotron.wandb_mode is {self.wandb_mode!r}: use one of {list(WANDB_MODES)}.")
        if not self.output_dir:
            raise ConfigError("lighteval_nanotron.output_dir is empty: set it to a folder for the results.")
        if self.system_prompt is not None and not self.system_prompt.strip():
            raise ConfigError("lighteval_nanotron.system_prompt is empty: give a prompt or remove it.")

    def check_against_training(self, train_steps: int, checkpoint_interval: Optional[int]) -> None:
        """Checks that need the rest of the training config."""
        if self.eval_interval is not None and self.eval_interval > train_steps:
            raise ConfigError(
                f"lighteval_nanotron.eval_interval={self.eval_interval} is larger than "
                f"tokens.train_steps={train_steps}, so it never fires: lower it or use eval_at_end."
            )
        if self.eval_at_checkpoints and checkpoint_interval is None:
            raise ConfigError(
                "lighteval_nanotron.eval_at_checkpoints is true but the training config has no "
                "checkpoints section: add one or use eval_interval."
            )


def _as_list(value: Union[str, List[str]]) -> List[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item and item.strip()]


def _check_positive(name: str, value: Optional[int], fix: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"lighteval_nanotron.{name} is {value!r}: set it to a positive integer {fix}.")
