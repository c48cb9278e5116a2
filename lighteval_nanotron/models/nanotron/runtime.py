"""The runtime objects of one engine, bundled once: model stage, mesh, device, tokenizer, config."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as dist

from lighteval_nanotron.models.nanotron.config import EngineConfig
from lighteval_nanotron.models.nanotron.tokenization import TokenizerAdapter
from lighteval_nanotron.parallel.mesh import Mesh
from lighteval_nanotron.parallel.pipeline import LocalStage, StageLink, unwrap_llama


def _chain_pp_ranks(llama: Any) -> list[int]:
    blocks = [
        llama.token_position_embeddings,
        *llama.decoder,
        llama.final_layer_norm,
        llama.lm_head,
        llama.cast_to_fp32,
    ]
    return sorted({block.rank for block in blocks})


def _device(llama: Any) -> torch.device:
    param = next(llama.parameters(), None)
    if param is not None:
        return param.device
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


@dataclass
class Runtime:
    llama: Any
    mesh: Mesh
    stage: LocalStage | None  # None: this PP rank owns no block
    chain_pp_ranks: list[int]
    device: torch.device
    tok: TokenizerAdapter
    config: EngineConfig
    max_length: int

    @classmethod
    def build(cls, model: Any, parallel_context: Any, tokenizer: Any, config: EngineConfig) -> "Runtime":
        llama = unwrap_llama(model)
        mesh = Mesh(
            parallel_context, output_pp_rank=llama.cast_to_fp32.rank, input_pp_rank=llama.token_position_embeddings.rank
        )
        chain = _chain_pp_ranks(llama)
        stage = LocalStage(llama, mesh.pp_rank) if mesh.pp_rank in chain else None
        max_length = config.max_length or int(llama.config.max_position_embeddings)
        tok = tokenizer if isinstance(tokenizer, TokenizerAdapter) else TokenizerAdapter(tokenizer)
        return cls(llama, mesh, stage, chain, _device(llama), tok, config, max_length)

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
