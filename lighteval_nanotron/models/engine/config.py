"""Settings of the Nanotron evaluation engine. Every speed-up is a switch; results do not depend
on any switch (the tests check each one on and off)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.options.base import same_scores, scores
from lighteval_nanotron.options.batching import BatchingOptions
from lighteval_nanotron.options.tokenization import TokenizationOptions
from lighteval_nanotron.requests import GenerationParameters

if TYPE_CHECKING:
    import torch


CPU_CHUNK_TOKENS = 1024
"""`EngineConfig.layer_chunk_tokens` on CPU when unset (measured: 1.5x the GEMM and elementwise
throughput of a whole 8k-token micro-batch on one core, docs/performance.md)."""


@dataclass
class EngineConfig(TokenizationOptions, BatchingOptions):
    """How requests become micro-batches, and where results go. How docs become tokens is
    `TokenizationOptions`, the budgets of a micro-batch `BatchingOptions` (their fields are this
    config's too), shared with the hook's section and `eval`."""

    max_rows_per_batch: int = field(default=64, metadata=same_scores())
    """Upper bound on the rows of one micro-batch, whatever the budget."""

    max_length: int | None = field(default=None, metadata=scores())
    """Longest sequence fed to the model; None takes the model's `max_position_embeddings`.
    Longer requests are truncated from the left and counted in `truncated_tokens_count`."""

    rolling_stride: int | None = field(default=None, metadata=scores())
    """Rolling log-likelihood: tokens scored per window after the first. Each window is
    `max_length` tokens long, so every scored token sees at least `max_length - stride` tokens
    of context. None means `max_length // 2`; `max_length` gives disjoint windows (lighteval)."""

    default_max_new_tokens: int = field(default=256, metadata=scores())
    """Generation: new tokens allowed for a doc whose `generation_size` is None."""

    generation_kv_tokens: int = field(default=32768, metadata=same_scores())
    """Generation with `kv_cache`: cache slots of one decoding pool, i.e. running rows x (longest
    context + new tokens of the pool). Rows beyond it wait and start as running rows finish."""

    prefill_tokens: int = field(default=2048, metadata=same_scores())
    """Generation with `kv_cache`: context tokens of one prefill step (the joining rows unpadded,
    at most `tokens_per_batch`; a longer row alone). Small steps keep the linear layers near
    their best matrix size on CPU and let pipeline stages overlap on the prefills."""

    micro_batches_in_flight: int = field(default=4, metadata=same_scores())
    """Pipeline parallel: sends a stage may have outstanding, i.e. micro-batches it may run ahead."""

    pipeline_overlap: bool = field(default=True, metadata=same_scores())
    """Pipeline parallel: let stages work on different micro-batches at once. Off: each
    micro-batch crosses the whole pipeline before the next starts (for measuring the gain)."""

    sort_by_length: bool = field(default=True, metadata=same_scores())
    """Sort requests by token length (longest first) before cutting batches. Off: input order."""

    pad_per_batch: bool = field(default=True, metadata=same_scores())
    """Pad each micro-batch to its own longest row. Off: pad every batch to the longest request."""

    shared_context: bool = field(default=True, metadata=same_scores())
    """Multiple choice: one prefix-tree row per doc (the context once, each choice a branch that
    sees the context and itself, position ids restarting after the context), so the context is
    computed once per doc, not once per choice; with `pack_rows`, identical prefixes across docs
    (a task's few-shot examples) are computed once per row. Off: one row per choice."""

    shared_prefix: bool = field(default=True, metadata=same_scores())
    """With `shared_context`: a prefix of at least `shared_prefix_min_tokens` tokens shared by
    several docs (a task's few-shot examples; with `pack_rows`, docs filling more than one row)
    is computed once per evaluation, and every row reads its keys and values, instead of once
    per packed row. Off: once per row (packed) or per doc."""

    shared_prefix_min_tokens: int = field(default=16, metadata=same_scores())
    """Shortest prefix `shared_prefix` takes out of the docs' sequences."""

    pack_rows: bool = field(default=True, metadata=same_scores())
    """Scoring: fill rows of `pack_width` tokens with several docs' sequences (in token order, so
    shared prefixes meet), each seeing only its own tokens: almost no padding. Off: one row per
    doc (`shared_context`) or per choice."""

    pack_width: int = field(default=1024, metadata=same_scores())
    """Nodes per packed row (a longer sequence gets a row of its own length). Attention in a
    packed row costs `pack_width**2` per row; larger shares more few-shot prefixes."""

    layer_chunk_tokens: int | None = field(default=None, metadata=same_scores())
    """Scoring: token positions per chunk of a decoder layer's position-wise parts (norms,
    projections, rotary, MLP), so their intermediates stay in the CPU's caches. None: 1024 on
    CPU, the whole micro-batch on other devices (larger calls suit them)."""

    logits_at_targets: bool = field(default=True, metadata=same_scores())
    """Run the final norm and `lm_head` only at the positions whose logits are read. Off: on every
    position (Nanotron's forward), then pick."""

    kv_cache: bool = field(default=True, metadata=same_scores())
    """Generation: decode with the engine's key/value cache (exact rotary positions): each replica's
    rows run in decoding pools (one per pipeline stage) that start waiting rows, longest first,
    as running rows finish. Off: micro-batches that recompute the full sequences at every step."""

    drop_finished_rows: bool = field(default=True, metadata=same_scores())
    """Generation with `kv_cache`: rows that are done leave the pool at once (their cache rows are
    dropped, their slots go to waiting rows). Off: they are fed until every running row is done."""

    add_special_tokens: bool = field(default=True, metadata=scores())
    """Let the tokenizer add its special tokens (e.g. BOS) to contexts."""

    generation: GenerationParameters | dict[str, Any] = field(
        default_factory=GenerationParameters, metadata=scores("measured")
    )
    """Generation: decoding settings of the run (temperature, top_k, top_p, num_samples, seed;
    a mapping is accepted). Unset: greedy. A task's own `generation_parameters` override them."""

    gather_to: Literal["all", "reporting"] = field(default="reporting", metadata=same_scores())
    """"reporting" (default): only DP 0 / TP 0 of the output pipeline stage returns the full,
    ordered results (one gather to it); every other rank returns an empty list. "all": every rank
    does (an all-gather: every replica's results travel to every rank)."""

    def named(self, option: str) -> str:
        return f"EngineConfig.{option}"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.generation = GenerationParameters.from_dict(self.generation)
        for name in (
            "max_rows_per_batch",
            "micro_batches_in_flight",
            "default_max_new_tokens",
            "pack_width",
            "shared_prefix_min_tokens",
            "generation_kv_tokens",
            "prefill_tokens",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"EngineConfig.{name} must be >= 1, got {getattr(self, name)}.")
        if self.layer_chunk_tokens is not None and self.layer_chunk_tokens < 1:
            raise ConfigError(f"EngineConfig.layer_chunk_tokens must be >= 1 or None, got {self.layer_chunk_tokens}.")
        if self.max_length is not None and self.max_length < 2:
            raise ConfigError(f"EngineConfig.max_length must be >= 2 or None, got {self.max_length}.")
        if self.rolling_stride is not None and self.rolling_stride < 1:
            raise ConfigError(f"EngineConfig.rolling_stride must be >= 1 or None, got {self.rolling_stride}.")
        if self.gather_to not in ("all", "reporting"):
            raise ConfigError(f"EngineConfig.gather_to must be 'all' or 'reporting', got {self.gather_to!r}.")

    SWITCHES = (
        "shared_context",
        "shared_prefix",
        "pack_rows",
        "logits_at_targets",
        "sort_by_length",
        "pad_per_batch",
        "pipeline_overlap",
        "kv_cache",
        "drop_finished_rows",
    )

    def chunk_tokens_for(self, device: "torch.device") -> int | None:
        """`layer_chunk_tokens` on `device` (None: see the field)."""
        if self.layer_chunk_tokens is not None:
            return self.layer_chunk_tokens
        return CPU_CHUNK_TOKENS if device.type == "cpu" else None

    def stride_for(self, max_length: int) -> int:
        stride = self.rolling_stride if self.rolling_stride is not None else max(1, max_length // 2)
        if stride > max_length:
            raise ConfigError(f"EngineConfig.rolling_stride ({stride}) must not exceed max_length ({max_length}).")
        return stride
