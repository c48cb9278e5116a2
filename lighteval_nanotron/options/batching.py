"""How requests are cut into micro-batches: options the engine takes as they are.

`EngineConfig` and `EvaluationOptions` both include this dataclass (as they include
`TokenizationOptions`), so each budget is declared here only. Results do not depend on either."""

from dataclasses import dataclass, field
from typing import Optional

from lighteval_nanotron.options.base import Options, same_scores


@dataclass(kw_only=True)
class BatchingOptions(Options):
    """The token and memory budgets of one micro-batch."""

    tokens_per_batch: int = field(default=8192, metadata=same_scores())
    """Token budget of one evaluation micro-batch per data-parallel replica: rows x padded length
    (prompt and continuation; generation without `kv_cache`: x (context + new tokens))."""

    memory_budget_gb: Optional[float] = field(default=None, metadata=same_scores())
    """Memory one evaluation micro-batch may take on each rank, in GiB (activations, estimated from
    the model's shape): lowers `tokens_per_batch` at each evaluation, and an evaluation whose single
    longest row needs more fails with one line. Unset: no bound on CPU; on CUDA the memory free when
    each evaluation starts, less a fifth of it left to the training. An allocation that fails anyway
    is retried with smaller micro-batches on every rank."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_positive("tokens_per_batch", "(a token budget), e.g. 8192")
        self.check_positive("memory_budget_gb", "(GiB), e.g. 4, or remove it", kind="number")
