"""Run a Nanotron Llama forward on every rank of a layout and gather the full logits (tests only)."""

from typing import Optional

import torch
import torch.distributed as dist


@torch.inference_mode()
def full_logits(model, parallel_context, input_ids: torch.Tensor, input_mask: Optional[torch.Tensor] = None):
    """[batch, seq, vocab] fp32 logits on the output pipeline stage's ranks, None on the others.

    Every rank of the PP group must call it with the same `input_ids`; only the input stage feeds
    them to the model, the others pass TensorPointers, and the vocabulary shards are gathered over TP.
    """
    from nanotron.parallel.pipeline_parallel.tensor_pointer import TensorPointer

    llama = model.model
    if input_mask is None:
        input_mask = torch.ones_like(input_ids, dtype=torch.bool)
    pp_rank = dist.get_rank(parallel_context.pp_pg)
    if pp_rank != llama.token_position_embeddings.rank:
        input_ids = input_mask = TensorPointer(group_rank=llama.token_position_embeddings.rank)
    model.eval()
    sharded = llama(input_ids=input_ids, input_mask=input_mask)
    llama.p2p.wait_pending()
    if isinstance(sharded, TensorPointer):
        return None
    shards = [torch.empty_like(sharded) for _ in range(parallel_context.tp_pg.size())]
    dist.all_gather(shards, sharded.contiguous(), group=parallel_context.tp_pg)
    return torch.cat(shards, dim=-1).transpose(0, 1).contiguous()
