"""`NanotronLightevalModel`: the model interface over a live, sharded Nanotron model (any supported family).

    engine = NanotronLightevalModel(model, parallel_context, tokenizer, EngineConfig())
    plan = engine.prepare_loglikelihood(docs)       # once: prompts, tokens, batches
    responses = engine.run(plan)                    # at every checkpoint: forwards only

Every rank of the mesh must make the same calls with the same docs (all PP stages take part in
every forward, all DP replicas in the final gather). Prompts are rendered and tokenized once, on
the reporting rank, and broadcast (`computed_once`); each rank then plans its own batches. With
`gather_to="reporting"` (default) only `engine.is_reporting_rank` (DP 0 / TP 0 of the output
pipeline stage) returns all responses in doc order and the others return `[]`; with `"all"` every
rank does. Each replica sends only the results it computed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Sequence, TypeVar

from lighteval_nanotron.errors import EvaluationOutOfMemory
from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.generation import run_generation
from lighteval_nanotron.models.engine.generation_plan import (
    GenerationPlan,
    build_generation_plan,
    generation_requests,
)
from lighteval_nanotron.models.engine.held_out import HeldOutPlan, build_held_out_plan, run_held_out
from lighteval_nanotron.models.engine.memory import (
    UNKNOWN,
    OutOfMemoryEverywhere,
    describe_bytes,
    memory_tokens,
    release,
)
from lighteval_nanotron.models.engine.runtime import Runtime, inference_mode
from lighteval_nanotron.models.engine.scoring import run_scoring
from lighteval_nanotron.models.engine.scoring_plan import ScoringPlan, build_batches, loglikelihood_rows, rolling_rows
from lighteval_nanotron.models.engine.vocabulary import check_token_ids
from lighteval_nanotron.models.interface import HeldOutModel
from lighteval_nanotron.parallel.agreement import agreed_minimum
from lighteval_nanotron.parallel.once import computed_once
from lighteval_nanotron.parallel.tp_mode import all_reduce_form
from lighteval_nanotron.requests import Doc, ModelResponse
from lighteval_nanotron.requests.held_out import HeldOutLosses, HeldOutSet
from lighteval_nanotron.tasks.prompt_manager import PromptManager

Plan = ScoringPlan | GenerationPlan | HeldOutPlan
P = TypeVar("P", ScoringPlan, GenerationPlan, HeldOutPlan)
T = TypeVar("T")
logger = logging.getLogger(__name__)


class NanotronLightevalModel(HeldOutModel):
    """Log-likelihood, rolling log-likelihood and greedy generation on a Nanotron model.

    `model` is a training model of a supported family (`models.families`: `LlamaForTraining`,
    `Starcoder2ForTraining`, ...), its inner model, or a DDP wrapper; anything else raises
    UnsupportedModelError naming its class. `tokenizer` a
    `transformers` or `tokenizers` tokenizer; `prompt_fn(doc) -> str` renders a doc's full
    context (default: plain-text `PromptManager().prepare_prompt`, few-shot examples included).
    """

    def __init__(
        self,
        model: Any,
        parallel_context: Any,
        tokenizer: Any,
        config: EngineConfig | None = None,
        prompt_fn: Callable[[Doc], str] | None = None,
    ):
        self.config = config or EngineConfig()
        self.runtime = Runtime.build(model, parallel_context, tokenizer, self.config)
        self.vocab_size = self.runtime.vocab_size
        """The model's vocabulary (every token id fed or scored must fit it: `engine.vocabulary`)."""
        if prompt_fn is None:
            prompt_fn = PromptManager(use_chat_template=False, tokenizer=tokenizer).prepare_prompt
        self.prompt_fn = prompt_fn

    @property
    def max_length(self) -> int:
        return self.runtime.max_length

    @property
    def tokenizer(self) -> Any:
        """The tokenizer the engine encodes with (held-out text is tokenized with it)."""
        return self.runtime.tok.tokenizer

    @property
    def is_reporting_rank(self) -> bool:
        return self.runtime.mesh.is_reporting_rank

    def computed_once(self, fn: Callable[[], T]) -> T:
        """`fn()` run on the reporting rank only and broadcast to every rank of the mesh (setup
        work such as loading datasets and tokenizing prompts); if it raises, every rank raises."""
        mesh = self.runtime.mesh
        return computed_once(fn, mesh.world_group, src=mesh.reporting_world_rank)

    @property
    def _min_batches(self) -> int:
        """With pipeline stages to overlap, enough micro-batches per replica to keep them busy."""
        pp = self.runtime.mesh.pp_size
        return 1 if pp == 1 or not self.config.pipeline_overlap else max(pp, self.config.micro_batches_in_flight)

    def _sized(self, build: Callable[[EngineConfig], P]) -> P:
        """`build(config)`, a plan that keeps how to cut itself again for a smaller budget."""
        plan = build(self.config)
        plan.config, plan.rebuild = self.config, build
        return plan

    def _scoring_plan(
        self, kind: str, rows: list, specs: list, num_slots: int, useful: int, cfg: EngineConfig
    ) -> ScoringPlan:
        mesh, rt = self.runtime.mesh, self.runtime
        batches, stats, prefixes = build_batches(
            rows,
            specs,
            cfg,
            mesh.dp_size,
            mesh.dp_rank,
            rt.pad_multiple,
            rt.tok.prefix_token_id,
            self._min_batches,
        )
        stats.useful_tokens = useful
        return ScoringPlan(kind, specs, num_slots, batches, stats, prefixes)

    def prepare_loglikelihood(self, docs: Sequence[Doc], unconditioned: bool = False) -> ScoringPlan:
        """Plan scoring `doc.choices` after each doc's prompt; with `unconditioned`, also after
        `doc.unconditioned_query` (for PMI) where the doc has one."""
        rt = self.runtime
        rows, specs, slots, useful = self.computed_once(
            lambda: self._checked_rows(
                docs, loglikelihood_rows(docs, rt.tok, self.prompt_fn, self.config, self.max_length, unconditioned)
            )
        )
        return self._sized(lambda cfg: self._scoring_plan("loglikelihood", rows, specs, slots, useful, cfg))

    def prepare_rolling(self, docs: Sequence[Doc]) -> ScoringPlan:
        """Plan the rolling log-likelihood of each doc's prompt text (sliding windows)."""
        rows, specs, slots, useful = self.computed_once(
            lambda: self._checked_rows(
                docs, rolling_rows(docs, self.runtime.tok, self.prompt_fn, self.config, self.max_length)
            )
        )
        return self._sized(lambda cfg: self._scoring_plan("rolling", rows, specs, slots, useful, cfg))

    def prepare_generation(self, docs: Sequence[Doc]) -> GenerationPlan:
        """Plan greedy generation for each doc (its `generation_size` and `stop_sequences`)."""
        mesh = self.runtime.mesh

        def checked_requests() -> list:
            requests = generation_requests(docs, self.prompt_fn, self.runtime.tok, self.config, self.max_length)
            check_token_ids([r.input_ids for r in requests], self.runtime.vocab_size, lambda k: _doc_name(docs[k]))
            return requests

        requests = self.computed_once(checked_requests)
        pools = mesh.pp_size if self.config.pipeline_overlap else 1
        return self._sized(
            lambda cfg: build_generation_plan(requests, cfg, mesh.dp_size, mesh.dp_rank, self._min_batches, pools)
        )

    def _checked_rows(self, docs: Sequence[Doc], built: tuple) -> tuple:
        """`built` (a scoring plan's rows, ...) once every fed and scored id is in the model's vocabulary."""
        rows = built[0]
        sequences = [ids for row in rows for ids in (row.input_ids, row.targets)]
        check_token_ids(sequences, self.runtime.vocab_size, lambda k: _doc_name(docs[rows[k // 2].doc_index]))
        return built

    def prepare_held_out(self, held_out: HeldOutSet) -> HeldOutPlan:
        """Plan scoring a held-out domain's windows (every rank passes the same set): this
        replica's contiguous share, cut into micro-batches of whole windows."""
        mesh = self.runtime.mesh
        return self._sized(
            lambda cfg: build_held_out_plan(held_out, cfg, mesh.dp_size, mesh.dp_rank, self._min_batches)
        )

    def run(
        self, plan: Plan, on_micro_batch: Callable[[int, int], None] | None = None
    ) -> list[ModelResponse] | list[HeldOutLosses]:
        """Evaluate a prepared plan on the model's current weights (no_grad, eval mode restored;
        TP linears in all-reduce form, their own TP mode restored: see `parallel.tp_mode`). A
        held-out plan gives `[HeldOutLosses]` on the ranks that receive results. `on_micro_batch`
        is told `(done, total)` as each of this rank's micro-batches ends (progress).

        Micro-batches fit the memory budget every rank agrees on now (`engine.memory`); where an
        allocation fails on some ranks, every rank drops the run, frees its memory and runs the
        plan again with micro-batches of half the tokens (the plan keeps them for later runs),
        down to one row each; a row that does not fit raises `EvaluationOutOfMemory`."""
        rt = self.runtime
        tokens, budget, free = self._agreed(*memory_tokens(self.config, rt.device, rt.token_bytes))
        while True:
            if tokens < plan.config.tokens_per_batch:
                _recut(plan, tokens)
            (widest,) = self._agreed_max(_widest_row(plan))
            if widest * rt.token_bytes > budget:
                raise self._out_of_memory(plan, widest, free, f"over memory_budget_gb ({describe_bytes(budget)})")
            try:
                return self._run(plan, on_micro_batch)
            except OutOfMemoryEverywhere as error:
                described = str(error)
            release(rt.device)  # the failed run's tensors died with its traceback
            smaller = max(1, min(plan.config.tokens_per_batch, _largest_batch(plan)) // 2)
            every_row_alone, tokens = self._agreed(int(_one_row_per_batch(plan)), smaller)
            if every_row_alone:
                raise self._out_of_memory(plan, widest, free, f"{_free(free)} was free ({described})")
            if rt.mesh.is_reporting_rank:
                logger.warning("%s ran out of memory; retrying with micro-batches of %d tokens", _what(plan), tokens)

    def _agreed(self, *values: int) -> list[int]:
        """The minimum of each value over every rank of the world."""
        return agreed_minimum(list(values), self.runtime.mesh.world_group)

    def _agreed_max(self, *values: int) -> list[int]:
        return [-value for value in self._agreed(*(-value for value in values))]

    def _out_of_memory(self, plan: Plan, widest: int, free: int, why: str) -> EvaluationOutOfMemory:
        needed = widest * self.runtime.token_bytes
        return EvaluationOutOfMemory(
            f"out of memory: {_what(plan)} of one row of {widest} tokens needs about {describe_bytes(needed)}, {why}; "
            "give the evaluation more memory (memory_budget_gb, or free it on the device) or shorten the longest "
            "prompts (max_length)",
            needed,
            None if free == UNKNOWN else free,
        )

    def _run(self, plan: Plan, on_micro_batch: Callable[[int, int], None] | None) -> list:
        rt = self.runtime
        rt.on_micro_batch, rt.config = on_micro_batch, plan.config
        try:
            with inference_mode(rt.inner), all_reduce_form(rt.inner):
                if isinstance(plan, HeldOutPlan):
                    return run_held_out(rt, plan)
                if isinstance(plan, GenerationPlan):
                    return run_generation(rt, plan)
                return run_scoring(rt, plan)
        finally:
            rt.on_micro_batch, rt.config = None, self.config

    def doc_tokens(self, plan: Plan) -> tuple[list[float], list[int]]:
        """Per doc of the plan (in order), after `run(plan)`: the token positions computed for it
        (its share of packed rows and padding: `doc_tokens.row_doc_tokens`; all replicas) and
        its useful tokens (context once plus what is scored or generated)."""
        if isinstance(plan, GenerationPlan):
            return list(plan.doc_processed_tokens), list(plan.doc_useful_tokens)
        if isinstance(plan, HeldOutPlan):
            return [float(plan.sequence_length)] * plan.total_windows, [plan.sequence_length] * plan.total_windows
        return [spec.processed_tokens for spec in plan.specs], [spec.useful_tokens for spec in plan.specs]

    def truncation(self, plan: Plan) -> list[tuple[int, int]]:
        """Per doc of the plan (in order): (context tokens cut from the left to fit `max_length`,
        continuation tokens left unscored because the continuation alone is longer; generation:
        new tokens asked for beyond what the window leaves)."""
        if isinstance(plan, GenerationPlan):
            return [(r.truncated_tokens_count, r.capped_new_tokens) for r in plan.requests]
        return [
            (min(len(spec.input_tokens), spec.truncated_tokens_count), spec.unscored_continuation_tokens)
            for spec in plan.specs
        ]

    def loglikelihood(self, docs: list[Doc], unconditioned: bool = False) -> list[ModelResponse]:
        return self.run(self.prepare_loglikelihood(docs, unconditioned))

    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        return self.run(self.prepare_rolling(docs))

    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        return self.run(self.prepare_generation(docs))


def _recut(plan: Plan, tokens: int) -> None:
    """Cut `plan` again, in place, for micro-batches of at most `tokens` tokens (packed rows no
    wider, the KV cache of generation shrunk in proportion)."""
    cfg = plan.config
    kv_tokens = max(1, cfg.generation_kv_tokens * tokens // cfg.tokens_per_batch)
    smaller = dataclasses.replace(
        cfg, tokens_per_batch=tokens, generation_kv_tokens=kv_tokens, pack_width=min(cfg.pack_width, tokens)
    )
    fresh = plan.rebuild(smaller)
    for item in dataclasses.fields(plan):
        if item.name != "rebuild":
            setattr(plan, item.name, getattr(fresh, item.name))
    plan.config = smaller


def _widest_row(plan: Plan) -> int:
    """Tokens of the plan's longest row (generation: context and new tokens)."""
    if isinstance(plan, HeldOutPlan):
        return plan.sequence_length
    if isinstance(plan, GenerationPlan):
        return max((r.token_length + r.generation_size for r in plan.requests), default=1)
    return max((b.input_ids.shape[1] for b in plan.batches + plan.prefixes.batches), default=1)


def _largest_batch(plan: Plan) -> int:
    """Tokens of the plan's largest micro-batch on this rank's replica (generation: its budget)."""
    if isinstance(plan, HeldOutPlan):
        return max((b - a for a, b in plan.batches), default=1) * plan.sequence_length
    if isinstance(plan, GenerationPlan):
        return plan.config.tokens_per_batch
    return max((b.input_ids.numel() for b in plan.batches + plan.prefixes.batches), default=1)


def _one_row_per_batch(plan: Plan) -> bool:
    """Whether no micro-batch of the plan can be smaller (generation: nor its decoding pool)."""
    if isinstance(plan, GenerationPlan):
        return plan.config.tokens_per_batch <= _widest_row(plan) and (
            not plan.config.kv_cache or plan.config.generation_kv_tokens <= _widest_row(plan)
        )
    if isinstance(plan, HeldOutPlan):
        return all(b - a == 1 for a, b in plan.batches)
    return all(b.input_ids.shape[0] == 1 for b in plan.batches + plan.prefixes.batches)


def _what(plan: Plan) -> str:
    return f"held-out loss of {plan.name}" if isinstance(plan, HeldOutPlan) else plan.kind


def _free(free: int) -> str:
    return "an unknown amount" if free == UNKNOWN else describe_bytes(free)


def _doc_name(doc: Doc) -> str:
    return f"task {doc.task_name or '?'}, doc {doc.id!r}"
