"""Pipeline point-to-point communication that works with gloo.

Gloo's `dist.send` blocks until the peer posts the matching receive (NCCL returns at once), and
Nanotron's `P2P` sends its metadata with blocking `dist.send`. `PipelineEvalBatchState` sends
before it receives, so with PP > 1 and several micro-batches in flight two stages can both block
in a send. `CpuP2P` posts every send (metadata and data) with `isend` into buffers of its own,
keeps the handles and tensors alive, and waits for them before its next send or in
`wait_pending()`: a send is never completed later than a blocking one would be, so every
schedule that works with blocking sends works here too, and send-before-receive cycles do not
deadlock.
"""

from typing import List, Tuple

import torch
from nanotron import distributed as dist
from nanotron.parallel.pipeline_parallel.p2p import (
    DTYPE_TO_ID,
    IS_CONTIGUOUS_TO_ID,
    P2P,
    REQUIRES_GRAD_TO_ID,
    get_untyped_storage,
)

CPU = torch.device("cpu")


class CpuP2P(P2P):
    """Nanotron's `P2P` on the CPU with non-blocking sends (the `device` argument is ignored)."""

    def __init__(self, pg: dist.ProcessGroup, device: torch.device = CPU):
        super().__init__(pg, device=CPU)
        self._pending: List[Tuple[dist.Work, torch.Tensor]] = []

    def _isend(self, tensor: torch.Tensor, to_rank: int, tag: int) -> dist.Work:
        work = dist.isend(tensor, dst=dist.get_global_rank(group=self.pg, group_rank=to_rank), group=self.pg, tag=tag)
        self._pending.append((work, tensor))
        return work

    def _send_meta(self, tensor: torch.Tensor, to_rank: int, tag: int) -> None:
        first = torch.tensor(
            [
                len(tensor.shape),
                len(tensor.stride()),
                IS_CONTIGUOUS_TO_ID[tensor.is_contiguous()],
                get_untyped_storage(tensor).size(),
                tensor.storage_offset(),
                DTYPE_TO_ID[tensor.dtype],
                REQUIRES_GRAD_TO_ID[tensor.requires_grad],
            ],
            dtype=torch.long,
        )
        self._isend(first, to_rank, tag)
        self._isend(torch.tensor(tensor.shape + tensor.stride(), dtype=torch.long), to_rank, tag)

    def isend_tensors(self, tensors: List[torch.Tensor], to_rank: int, tag: int = 0) -> List[dist.Work]:
        works = super().isend_tensors(tensors, to_rank=to_rank, tag=tag)
        self._pending.extend((work, tensor) for work, tensor in zip(works, tensors))
        return works

    def send_tensors(self, tensors: List[torch.Tensor], to_rank: int, tag: int = 0) -> None:
        self.wait_pending()
        self.isend_tensors(tensors, to_rank=to_rank, tag=tag)

    def wait_pending(self) -> None:
        """Wait until every send posted so far has been received."""
        pending, self._pending = self._pending, []
        for work, _ in pending:
            work.wait()
