"""Pipeline-parallel inference over a Nanotron model: the blocks this PP rank owns, and the links.

A Nanotron model's forward is a chain of `PipelineBlock`s (embedding, decoder layers, final
norm, lm_head, fp32 cast; its model family lists them, with how to call each); each block is
built on one PP rank only. `LocalStage` runs the
contiguous slice of that chain this rank owns, calling the built modules directly, and
`StageLink` moves the one activation that crosses a stage boundary with non-blocking
`isend`/`irecv` (gloo's blocking `send` waits for the peer, so Nanotron's own eval batch state
deadlocks there with several micro-batches in flight). Shape and dtype travel in a small header,
so the receiver needs no knowledge of TP mode or hidden size; when both sides know the leading
dimensions of every activation (generation: `[seq, rows]` of each step before the final norm,
`[selected positions, 1]` after it: `LocalStage.boundary_leading`), only the first one on a link
carries a header and later ones reuse its dtype and trailing dimensions (one message per step
instead of two). Both ends check the leading dimensions they were given (`check_leading`):
gloo fills a longer receive buffer in part without a word, so a disagreement would otherwise be
read as uninitialised values.

Every stage knows the whole batch plan, so masks and token ids are built locally on each stage;
only activations (and, for generation, the new tokens) are sent.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.distributed as dist

from lighteval_nanotron.errors import LayoutError
from lighteval_nanotron.parallel.deadline import wait

_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.bool]
_HEADER = 8  # dtype id, ndim, up to 6 dims
_TAG_ACTIVATION = 11
_TAG_FEEDBACK = 12


class LocalStage:
    """The contiguous slice of the block chain owned by this PP rank, run with plain calls.

    `steps` are the model's chain blocks in forward order: objects with `block` (the
    `PipelineBlock`), `run(module, x, mask)`, `kind` ("layer", "norm" or "other") and
    `layer_index`. `layer_view(module)` gives the view of a decoder layer that `tree.run_layer`
    takes."""

    def __init__(self, steps: Sequence[Any], pp_rank: int, layer_view: Callable[[Any], Any]):
        self._layer_view = layer_view
        owned = [i for i, step in enumerate(steps) if step.block.rank == pp_rank]
        if not owned or owned != list(range(owned[0], owned[-1] + 1)):
            raise LayoutError(
                f"PP rank {pp_rank} owns blocks {owned} of the model's chain; the engine needs one "
                "contiguous, non-empty slice per pipeline rank (use fewer pipeline stages than blocks)."
            )
        norm = next((i for i, step in enumerate(steps) if step.kind == "norm"), None)
        if norm is None:
            raise LayoutError("The model's chain has no final norm block; the engine selects positions before it.")
        self._steps = [steps[i] for i in owned]
        self.is_first = owned[0] == 0
        self.is_last = owned[-1] == len(steps) - 1
        self.prev_pp_rank = None if self.is_first else steps[owned[0] - 1].block.rank
        self.next_pp_rank = None if self.is_last else steps[owned[-1] + 1].block.rank
        # Nanotron places blocks by compute cost: with few layers or a large vocabulary the final
        # norm (and lm_head) can sit on an earlier stage than the last, whose activations are then
        # only the selected positions.
        self.receives_selected = norm < owned[0]
        self.sends_selected = norm <= owned[-1]

    def boundary_leading(self, leading: tuple[int, ...], select: Any, outgoing: bool) -> tuple[int, ...]:
        """The first dimensions of the activation this stage receives (`outgoing` False) or sends:
        `leading` (`[seq, rows]`) before the final norm, `[selected positions, 1]` after it when
        `select` picks positions (`forward`); `()` stays `()` (a header with every activation)."""
        selected = self.sends_selected if outgoing else self.receives_selected
        if not leading or select is None or not selected:
            return leading
        return (len(select[0]), 1)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        tree: Any = None,
        select: Any = None,
        consume: Callable[[torch.Tensor, int], None] | None = None,
        chunk_rows: int = 128,
    ) -> torch.Tensor | None:
        """Input ids `[batch, seq]` on the first stage, else the previous stage's activation;
        returns the next activation, or fp32 logits `[seq, batch, vocab / tp]` on the last stage.

        `tree` (a `TreeAttention`): decoder layers run through `tree.run_layer` (explicit
        positions and mask) instead of Nanotron's forward. `select` (`(positions, rows)` index
        tensors): only those hidden states reach the final norm and `lm_head`, and the logits are
        `[n, 1, vocab / tp]`. `consume` (last stage, with `select`): the blocks after the final
        norm (`lm_head`, fp32 cast) run on `chunk_rows` selected positions at a time and each
        chunk's logits go to `consume(logits, first position)`; returns None (the logits of all
        positions never exist at once)."""
        chunked = consume is not None and select is not None and self.is_last
        split = next((j + 1 for j, step in enumerate(self._steps) if step.kind == "norm"), 0) if chunked else None
        for step in self._steps[:split]:
            if step.kind == "layer" and tree is not None:
                x = tree.run_layer(self._layer_view(step.block.pp_block), x, step.layer_index)
                continue
            if step.kind == "norm" and select is not None:
                x = x[select[0].to(x.device), select[1].to(x.device)][:, None]
            x = step.run(step.block.pp_block, x, mask)
        if not chunked:
            return x
        for start in range(0, x.shape[0], chunk_rows):
            chunk = x[start : start + chunk_rows]
            for step in self._steps[split:]:
                chunk = step.run(step.block.pp_block, chunk, mask)
            consume(chunk, start)
        return None


def check_leading(shape: Sequence[int], leading: tuple[int, ...], what: str) -> None:
    """LayoutError when a tensor's `shape` does not start with the dimensions `leading` (both sides of a
    stage boundary derive them from the plan; a mismatch is an engine bug, and gloo would fill a
    longer receive buffer in part, silently)."""
    if tuple(shape[: len(leading)]) != tuple(leading):
        raise LayoutError(
            f"{what} has shape {tuple(shape)} where {tuple(leading)} leading dimensions were expected: the "
            "pipeline's activations are mis-shaped (an engine bug; please report it with the model and the layout)."
        )


def _header(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dim() > _HEADER - 2:
        raise LayoutError(f"Cannot send a {tensor.dim()}-d activation between stages (at most {_HEADER - 2}).")
    values = [_DTYPES.index(tensor.dtype), tensor.dim(), *tensor.shape]
    return torch.tensor(values + [0] * (_HEADER - len(values)), dtype=torch.int64)


class StageLink:
    """Non-blocking point-to-point transfers inside this process's PP group.

    At most `max_pending` activation sends are outstanding; the oldest is waited on before a new
    one starts, which bounds the activations kept alive while stages run ahead of each other.
    Feedback sends (a few ints) are never waited on before `flush`, so the output stage cannot
    block on a stage that is itself waiting for the output stage.
    """

    def __init__(self, mesh: Any, device: torch.device, max_pending: int):
        self._mesh = mesh
        self._device = device
        self._max_pending = max(1, max_pending)
        self._pending: deque[tuple[Any, torch.Tensor]] = deque()
        self._feedback: list[tuple[Any, torch.Tensor]] = []
        self._agreed_out: dict[int, tuple[torch.dtype, tuple[int, ...]]] = {}  # peer -> dtype, trailing dims
        self._agreed_in: dict[int, tuple[torch.dtype, tuple[int, ...]]] = {}

    def _peer(self, pp_rank: int) -> int:
        return self._mesh.pp_global_rank(pp_rank)

    def _isend(self, tensor: torch.Tensor, pp_rank: int, tag: int) -> tuple[Any, torch.Tensor]:
        return dist.isend(tensor, dst=self._peer(pp_rank), group=self._mesh.pp_group, tag=tag), tensor

    def _isend_bounded(self, tensor: torch.Tensor, pp_rank: int) -> None:
        while len(self._pending) >= self._max_pending:
            wait(self._pending.popleft()[0])
        self._pending.append(self._isend(tensor, pp_rank, _TAG_ACTIVATION))

    def _recv(self, buffer: torch.Tensor, pp_rank: int, tag: int) -> torch.Tensor:
        wait(dist.irecv(buffer, src=self._peer(pp_rank), group=self._mesh.pp_group, tag=tag))
        return buffer

    def send_activation(self, tensor: torch.Tensor, pp_rank: int, leading: tuple[int, ...] = ()) -> None:
        """`leading`: the first dimensions of `tensor`, which the receiver passes to
        `recv_activation`, so after the first activation on this link no header is sent. A tensor
        that does not start with them raises LayoutError before anything is sent (the receiver
        would read a wrong-sized buffer: gloo fills a longer one in part, silently)."""
        check_leading(tensor.shape, leading, f"The activation to PP rank {pp_rank}")
        tensor = tensor.contiguous()
        trailing = (tensor.dtype, tuple(tensor.shape[len(leading) :]))
        agreed = self._agreed_out.get(pp_rank) if leading else None
        if agreed is None:
            self._isend_bounded(_header(tensor).to(self._device), pp_rank)
            if leading:
                self._agreed_out[pp_rank] = trailing
        elif agreed != trailing:
            raise LayoutError(f"Activation to PP rank {pp_rank} changed from {agreed} to {trailing} without a header.")
        self._isend_bounded(tensor, pp_rank)

    def recv_activation(self, pp_rank: int, leading: tuple[int, ...] = ()) -> torch.Tensor:
        """`leading`: the first dimensions of the activation, known to both sides (see `send_activation`)."""
        agreed = self._agreed_in.get(pp_rank) if leading else None
        if agreed is None:
            header = self._recv(torch.empty(_HEADER, dtype=torch.int64, device=self._device), pp_rank, _TAG_ACTIVATION)
            values = header.tolist()
            dtype, shape = _DTYPES[values[0]], tuple(values[2 : 2 + values[1]])
            check_leading(shape, leading, f"The activation from PP rank {pp_rank}")
            if leading:
                self._agreed_in[pp_rank] = (dtype, shape[len(leading) :])
        else:
            dtype, shape = agreed[0], tuple(leading) + agreed[1]
        return self._recv(torch.empty(shape, dtype=dtype, device=self._device), pp_rank, _TAG_ACTIVATION)

    def send_feedback(self, tensor: torch.Tensor, pp_ranks: list[int]) -> None:
        """Send a small int64 tensor (fixed shape known to the receivers) to several stages."""
        payload = tensor.to(self._device).contiguous()
        self._feedback = [(work, sent) for work, sent in self._feedback if not work.is_completed()]
        self._feedback += [self._isend(payload, pp_rank, _TAG_FEEDBACK) for pp_rank in pp_ranks]

    def recv_feedback(self, shape: tuple[int, ...], pp_rank: int) -> torch.Tensor:
        return self._recv(torch.empty(shape, dtype=torch.int64, device=self._device), pp_rank, _TAG_FEEDBACK).cpu()

    def flush(self) -> None:
        """Wait for every outstanding send (call before the tensors sent may be reused or freed)."""
        while self._pending:
            wait(self._pending.popleft()[0])
        for work, _ in self._feedback:
            wait(work)
        self._feedback.clear()


def stage_input(
    stage: LocalStage, link: StageLink, ids: torch.Tensor, select: Any = None, leading: tuple[int, ...] = ()
) -> torch.Tensor:
    """What this stage computes a micro-batch from: its input ids `[rows, seq]` on the first stage,
    else the previous stage's activation (received here; `select`, `leading`: see `run_stage`)."""
    if stage.is_first:
        return ids
    return link.recv_activation(stage.prev_pp_rank, stage.boundary_leading(leading, select, outgoing=False))


def run_stage(
    stage: LocalStage,
    link: StageLink,
    x: torch.Tensor,
    mask: torch.Tensor,
    tree: Any = None,
    select: Any = None,
    consume: Callable[[torch.Tensor, int], None] | None = None,
    leading: tuple[int, ...] = (),
) -> torch.Tensor | None:
    """One micro-batch through this rank's stage from its `stage_input` `x`: compute, send (unless
    last). Returns the logits on the last stage (None with `consume`), None elsewhere (`tree`,
    `select`, `consume`: see `LocalStage.forward`; `leading`: the first dimensions of the
    activations before the final norm, known to every stage, so that only the first activation of
    the link carries a header; after the norm they are the selected positions', see
    `LocalStage.boundary_leading`)."""
    out = stage.forward(x, mask, tree, select, consume)
    if stage.is_last:
        return out
    link.send_activation(out, stage.next_pp_rank, stage.boundary_leading(leading, select, outgoing=True))
    return None


class OutputStageFailure:
    """The output stage's first failure in a run whose activations all carry a header (scoring,
    held-out loss): mis-shaped logits, a kernel error, ... after a micro-batch's activation arrived.
    From then on the stage only receives and drops what the previous stage still sends (`drain`, one
    activation per micro-batch), so the other stages finish the run and no send is left unmatched
    for the next run; the error is raised when the loop is over (`raise_if_failed`)."""

    def __init__(self, stage: LocalStage, link: StageLink):
        self._stage, self._link = stage, link
        self.error: Exception | None = None

    def drain(self) -> None:
        """Receive and drop this micro-batch's activation."""
        stage_input(self._stage, self._link, torch.zeros(0))

    @contextlib.contextmanager
    def guarding(self) -> Iterator[None]:
        """Around a micro-batch's work after its activation arrived: on the output stage of a
        pipeline, an error is kept (the first) instead of raised."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 - raised by `raise_if_failed` after the loop
            if not self._stage.is_last or self._stage.is_first:
                raise
            self.error = self.error or error

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error
