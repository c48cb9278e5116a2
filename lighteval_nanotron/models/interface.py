"""The model interface: what the evaluation pipeline calls on a model, written down.

`LightevalModel` is what every model gives: lighteval's three request kinds (one `ModelResponse`
per doc, in doc order) and the few attributes the pipeline reads, with their defaults for a model
that runs in one process. `PlanningModel` adds the prepare-once / run-many split of the Nanotron
engine: the pipeline plans the requests when it prepares and only runs the plans at each
evaluation. `HeldOutModel` adds held-out loss (`pipeline.held_out`). A model lacking an optional
capability says so: `supports_unconditioned = False` (no unconditioned log-probabilities, so no PMI
metric), or not being a `PlanningModel` (its request methods then run at every evaluation) or a
`HeldOutModel` (held-out domains are refused when the pipeline prepares).

    class MyModel(LightevalModel):          # subclassing gives the defaults; the three methods are required
        def loglikelihood(self, docs, unconditioned=False): ...
        def loglikelihood_rolling(self, docs): ...
        def greedy_until(self, docs): ...
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from lighteval_nanotron.requests import Doc, ModelResponse

T = TypeVar("T")


@runtime_checkable
class LightevalModel(Protocol):
    """A model that answers docs: each request method returns one `ModelResponse` per doc, in doc order."""

    model_name: str | None = None
    """Its name in results and output paths (None: the pipeline's `model_name`, else "model")."""
    is_reporting_rank: bool = True
    """Whether this process gets the responses and reports the results (True off a mesh)."""
    prompt_fn: Callable[[Doc], str] | None = None
    """How it renders a doc's full context, shown in the details (None: plain-text `PromptManager`)."""
    supports_unconditioned: bool = True
    """Whether `loglikelihood(..., unconditioned=True)` (and `prepare_loglikelihood`) scores the choices
    after `doc.unconditioned_query` too (PMI metrics); False: tasks with a PMI metric are refused when
    the pipeline prepares."""

    @abstractmethod
    def loglikelihood(self, docs: list[Doc], unconditioned: bool = False) -> list[ModelResponse]:
        """Log-probability of each of `doc.choices` after the doc's full prompt (LOGPROBS)."""

    @abstractmethod
    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        """Log-likelihood of the doc's whole prompt text, however long (PERPLEXITY)."""

    @abstractmethod
    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        """Greedy continuation of the doc's prompt until a stop condition (GENERATIVE)."""

    def computed_once(self, fn: Callable[[], T]) -> T:
        """`fn()` computed once for every process the model spans and given to each (setup work:
        datasets, docs); in one process, just `fn()`."""
        return fn()


@runtime_checkable
class PlanningModel(LightevalModel, Protocol):
    """A model that plans its requests once (prompts, tokens, batches) and runs the plans many times."""

    @abstractmethod
    def prepare_loglikelihood(self, docs: Sequence[Doc], unconditioned: bool = False) -> Any:
        """The plan of `loglikelihood(docs, unconditioned)`."""

    @abstractmethod
    def prepare_rolling(self, docs: Sequence[Doc]) -> Any:
        """The plan of `loglikelihood_rolling(docs)`."""

    @abstractmethod
    def prepare_generation(self, docs: Sequence[Doc]) -> Any:
        """The plan of `greedy_until(docs)`."""

    @abstractmethod
    def run(self, plan: Any, on_micro_batch: Callable[[int, int], None] | None = None) -> list[ModelResponse]:
        """The responses of a plan, on the model's current weights. `on_micro_batch`, when given, is
        told `(done, total)` as each of the plan's micro-batches ends on this process (progress)."""

    max_length: int | None = None
    """The longest input it takes, named in the truncation warnings (None: not known)."""

    def doc_tokens(self, plan: Any) -> tuple[list[float], list[int]] | None:
        """Per doc of a plan that ran: the token positions computed for it and its useful tokens
        (None: the pipeline counts them from the responses)."""
        return None

    def truncation(self, plan: Any) -> list[tuple[int, int]] | None:
        """Per doc of a plan: (context tokens cut to fit `max_length`, continuation tokens left unscored;
        generation: new tokens asked for beyond the window), for the truncation warnings (None: not known)."""
        return None


@runtime_checkable
class HeldOutModel(PlanningModel, Protocol):
    """A planning model that also scores held-out text windows (`pipeline.held_out`)."""

    tokenizer: Any
    """What held-out text is tokenized with."""
    vocab_size: int
    """The model's vocabulary (held-out token ids must fit it)."""
    max_length: int

    @abstractmethod
    def prepare_held_out(self, held_out: Any) -> Any:
        """The plan of a held-out domain's windows (a `requests.held_out.HeldOutSet`); `run` of it gives
        `[HeldOutLosses]` on the ranks that receive results."""


def missing_members(model: Any, protocol: type) -> list[str]:
    """The members of `protocol` (a class above) that `model` lacks, for the message refusing it."""
    members: set[str] = set()
    for klass in protocol.__mro__:
        if klass.__module__ == __name__:
            members |= {name for name in vars(klass) if not name.startswith("_")} | set(klass.__annotations__)
    return sorted(name for name in members if not hasattr(model, name))
