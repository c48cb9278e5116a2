"""The runtime objects of one engine, bundled once: model stage, mesh, device, tokenizer, config."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import torch
import torch.distributed as dist

from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.memory import oom_failure, token_bytes
from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
from lighteval_nanotron.models.engine.vocabulary import check_tokenizer_fits, tokenizer_size
from lighteval_nanotron.models.families import ModelFamily, family_of_model
from lighteval_nanotron.parallel.agreement import collectively
from lighteval_nanotron.parallel.deadline import deadline_s
from lighteval_nanotron.parallel.mesh import Mesh
from lighteval_nanotron.parallel.stages import LocalStage, StageLink

T = TypeVar("T")
_TIMEOUT_HINT = (
    "Raise the failure timeout (eval --failure-timeout-s, the hook's lighteval_nanotron.failure_timeout_s) if the "
    "evaluation is only slow."
)


def _device(inner: Any) -> torch.device:
    param = next(inner.parameters(), None)
    if param is not None:
        return param.device
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


@dataclass
class Runtime:
    inner: Any  # the family's inner model (the PipelineBlock chain)
    family: type[ModelFamily]
    mesh: Mesh
    stage: LocalStage | None  # None: this PP rank owns no block
    chain_pp_ranks: list[int]
    device: torch.device
    tok: TokenizerAdapter
    config: EngineConfig
    max_length: int
    vocab_size: int
    """Rows of the model's embedding (its config's `vocab_size`): every id fed or scored is below it."""
    tokenizer_size: int
    """Ids the tokenizer knows (<= vocab_size); a generated id at or past it cannot be decoded."""
    token_bytes: int
    """Memory one token of a micro-batch may take at once on this rank (`memory.token_bytes`)."""
    on_micro_batch: Callable[[int, int], None] | None = None
    """Told `(done, total)` as each of this rank's micro-batches of the running plan ends (progress)."""

    @classmethod
    def build(cls, model: Any, parallel_context: Any, tokenizer: Any, config: EngineConfig) -> "Runtime":
        family = family_of_model(model)
        model_config = family.config_of(model)
        family.check_config(model_config)
        inner = family.inner_model(model)
        blocks = family.chain(inner)
        mesh = Mesh(parallel_context, output_pp_rank=blocks[-1].block.rank, input_pp_rank=blocks[0].block.rank)
        chain = sorted({step.block.rank for step in blocks})
        stage = LocalStage(blocks, mesh.pp_rank, family.decoder_layer) if mesh.pp_rank in chain else None
        max_length = config.max_length or family.max_positions(model_config)
        tok = tokenizer if isinstance(tokenizer, TokenizerAdapter) else TokenizerAdapter(tokenizer)
        vocab_size = int(model_config.vocab_size)
        special = {"BOS": tok.bos_token_id, "EOS": tok.eos_token_id, "padding": tok.pad_token_id}
        check_tokenizer_fits(tok.tokenizer, special, vocab_size)
        known = tokenizer_size(tok.tokenizer) or vocab_size
        param = next(inner.parameters(), None)
        per_token = token_bytes(model_config, mesh.tp_size, torch.float32 if param is None else param.dtype, config)
        device = _device(inner)
        return cls(inner, family, mesh, stage, chain, device, tok, config, max_length, vocab_size, known, per_token)

    @property
    def kv_cache(self) -> bool:
        """Generation with a KV cache (every TP mode: `run` evaluates in all-reduce form)."""
        return self.config.kv_cache

    @property
    def pad_multiple(self) -> int:
        """Scoring rows are padded to a multiple of the TP size."""
        return self.mesh.tp_size

    def new_link(self) -> StageLink:
        return StageLink(self.mesh, self.device, 2 * self.config.micro_batches_in_flight)

    def micro_batch_done(self, done: int, total: int) -> None:
        """Report that `done` of this rank's `total` micro-batches of the running plan have ended."""
        if self.on_micro_batch is not None:
            self.on_micro_batch(done, total)

    def agreed(self, local: Callable[[], T], what: str) -> T:
        """`local()`, this rank's part of a run (the pipelined forwards), then one flag all-reduce
        over the world (`collectively`): if it raised on any rank, every rank raises together
        before the results gather, so no rank is left alone in a collective; `OutOfMemoryEverywhere`
        when every failing rank ran out of memory (the engine retries with smaller batches)."""
        world = self.mesh.world_group
        return collectively(
            world, what, local, timeout_hint=_TIMEOUT_HINT, timeout_s=deadline_s(world), failure=oom_failure
        )

    def sync_pipeline(self) -> None:
        """Without pipeline overlap: wait until every stage has finished the current micro-batch."""
        if not self.config.pipeline_overlap and self.mesh.pp_size > 1:
            dist.barrier(group=self.mesh.pp_group)


@contextlib.contextmanager
def inference_mode(module: torch.nn.Module) -> Iterator[None]:
    """Eval mode and no autograd for the block; every submodule's `training` flag is restored."""
    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, flag in flags:
            m.training = flag
