"""StageLink refuses an activation whose leading dimensions differ from the ones both stages
derive from the plan, on the side that can see it, instead of letting gloo fill a longer receive
buffer in part (measured: the rest of the buffer keeps whatever it held)."""

from __future__ import annotations

from tests.helpers.distributed import run_distributed


def _exchange(case: str) -> str:
    """Rank function (PP2): rank 0 sends to rank 1; returns what each side saw."""
    import torch

    from lighteval_nanotron.errors import LayoutError
    from lighteval_nanotron.parallel.deadline import bounded_collectives
    from lighteval_nanotron.parallel.mesh import Mesh
    from lighteval_nanotron.parallel.stages import StageLink
    from tests.helpers.distributed import parallel_context

    context = parallel_context(1, 2, 1)
    mesh = Mesh(context, output_pp_rank=1, input_pp_rank=0)
    link = StageLink(mesh, torch.device("cpu"), max_pending=4)
    with bounded_collectives(context, timeout_s=20):
        try:
            if mesh.pp_rank == 0:
                link.send_activation(torch.ones(3, 1, 4), 1, leading=(3, 1))  # agreed: header once
                link.flush()
                link.send_activation(torch.ones(2, 1, 4), 1, leading=(5, 1) if case == "sender" else (2, 1))
                link.flush()
                return "sent"
            first = link.recv_activation(0, leading=(3, 1))
            if case == "sender":
                return f"received {tuple(first.shape)}"
            return f"received {tuple(link.recv_activation(0, leading=(2, 1)).shape)}"
        except LayoutError as error:
            return f"LayoutError: {error}"


def test_an_activation_that_does_not_start_with_the_leading_dims_is_refused_before_sending():
    sender, receiver = run_distributed(_exchange, 2, "sender", timeout=60)
    assert sender.startswith("LayoutError: The activation to PP rank 1 has shape (2, 1, 4) where (5, 1)")
    assert receiver == "received (3, 1, 4)"


def test_agreed_activations_after_the_header_keep_their_trailing_dims():
    assert run_distributed(_exchange, 2, "agreed", timeout=60) == ["sent", "received (2, 1, 4)"]


def _header_mismatch() -> str:
    import torch

    from lighteval_nanotron.errors import LayoutError
    from lighteval_nanotron.parallel.mesh import Mesh
    from lighteval_nanotron.parallel.stages import StageLink
    from tests.helpers.distributed import parallel_context

    context = parallel_context(1, 2, 1)
    mesh = Mesh(context, output_pp_rank=1, input_pp_rank=0)
    link = StageLink(mesh, torch.device("cpu"), max_pending=4)
    outcome = "received"
    if mesh.pp_rank == 0:
        link.send_activation(torch.ones(3, 1, 4), 1)  # a header, no leading dims promised
        outcome = "sent"  # the tensor after the header is never received
    else:
        try:
            link.recv_activation(0, leading=(7, 1))
        except LayoutError as error:
            outcome = f"LayoutError: {error}"
    torch.distributed.barrier(group=context.world_pg)  # the header has arrived before rank 0 leaves
    return outcome


def test_a_header_that_disagrees_with_the_expected_leading_dims_is_refused():
    sender, receiver = run_distributed(_header_mismatch, 2, timeout=60)
    assert sender == "sent"
    assert receiver.startswith("LayoutError: The activation from PP rank 0 has shape (3, 1, 4) where (7, 1)")
