"""CpuP2P: pipeline stages that send before they receive do not deadlock under gloo
(Nanotron's own P2P, with blocking gloo sends, hangs on exactly this exchange)."""

import pytest
import torch

from tests.helpers.distributed import parallel_context, run_distributed


def _exchange(size: int):
    import torch.distributed as dist

    from lighteval_nanotron.cpu.p2p import CpuP2P

    context = parallel_context(1, 2, 1)
    p2p = CpuP2P(context.pp_pg)
    me = dist.get_rank(context.pp_pg)
    received = []
    for step in range(3):
        sent = torch.full((2, size // 2), float(10 * me + step)).t()  # non-contiguous, whole storage
        p2p.send_tensors([sent], to_rank=1 - me)
        (tensor,) = p2p.recv_tensors(num_tensors=1, from_rank=1 - me)
        received.append((tuple(tensor.shape), tensor[0, 0].item()))
    p2p.wait_pending()
    return received


@pytest.mark.parametrize("size", [8, 400_000])
def test_send_then_receive_cycle_completes(size):
    results = run_distributed(_exchange, 2, size, timeout=60)
    assert results == [
        [((size // 2, 2), 10.0 + step) for step in range(3)],
        [((size // 2, 2), float(step)) for step in range(3)],
    ]
