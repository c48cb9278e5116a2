"""Greedy decoding of a generation plan across the pipeline.

Every stage of a replica keeps the same decoding state for each micro-batch. The output stage
picks the next tokens (vocabulary-parallel argmax), decides which rows are done (EOS, the row's
`max_new_tokens`, one of its stop sequences, or the context window full) and sends
`[tokens; done]` to the other stages, which apply it before that micro-batch's next step.
Micro-batches are visited round-robin, so while one waits for its tokens the stages work on
others. A micro-batch leaves as soon as all its rows are done.

With `kv_cache` each micro-batch has its own Nanotron `Store` (left-padded prefill, then one
token per step); without it every step recomputes the right-padded sequences of the rows still
running.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from lighteval_nanotron.models.model_output import ModelResponse
from lighteval_nanotron.models.nanotron.batching import round_up
from lighteval_nanotron.models.nanotron.generation_plan import GenerationPlan, GenRequest
from lighteval_nanotron.models.nanotron.runtime import Runtime
from lighteval_nanotron.parallel.pipeline import run_stage
from lighteval_nanotron.parallel.vocab_parallel import greedy_tokens

_NONE = -1


@dataclass
class _Decoding:
    requests: list[GenRequest]
    generated: list[list[int]]
    done: list[bool]
    store: Any = None
    step: int = 0
    awaiting_feedback: bool = False
    rows: list[int] = field(default_factory=list)  # rows fed at the current step

    @classmethod
    def start(cls, requests: list[GenRequest], kv_cache: bool) -> "_Decoding":
        store = None
        if kv_cache:
            from nanotron.generation.generate_store import Store

            store = Store()
        return cls(requests, [[] for _ in requests], [False] * len(requests), store)


def _inputs(rt: Runtime, st: _Decoding) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input ids, mask, and the position of each fed row's last token."""
    if st.store is not None and st.step > 0:
        st.rows = list(range(len(st.requests)))
        last = [(g or list(r.input_ids))[-1] for r, g in zip(st.requests, st.generated)]
        ids = torch.tensor(last, dtype=torch.long)[:, None]
        return ids, torch.ones_like(ids, dtype=torch.bool), torch.zeros(len(last), dtype=torch.long)
    st.rows = [i for i, done in enumerate(st.done) if not done]
    seqs = [list(st.requests[i].input_ids) + st.generated[i] for i in st.rows]
    width = round_up(max(len(s) for s in seqs), rt.pad_multiple) if st.store is None else max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for r, seq in enumerate(seqs):
        span = slice(width - len(seq), width) if st.store is not None else slice(0, len(seq))
        ids[r, span] = torch.tensor(seq, dtype=torch.long)
        mask[r, span] = True
    if st.store is None:
        return ids, torch.ones_like(mask), torch.tensor([len(s) - 1 for s in seqs])
    return ids, mask, torch.full((len(seqs),), width - 1, dtype=torch.long)


def _stopped(rt: Runtime, request: GenRequest, tokens: list[int]) -> bool:
    if len(tokens) >= request.generation_size or len(request.input_ids) + len(tokens) >= rt.max_length:
        return True
    if not request.stop_sequences:
        return False
    text = rt.tok.decode(tokens)
    return any(stop in text for stop in request.stop_sequences)


def _decide(rt: Runtime, st: _Decoding, new_tokens: list[int]) -> torch.Tensor:
    """Feedback `[2, rows]`: the token appended to each row (or -1) and whether it is done."""
    feedback = torch.full((2, len(st.requests)), _NONE, dtype=torch.long)
    feedback[1] = torch.tensor(st.done, dtype=torch.long)
    for row, token in zip(st.rows, new_tokens):
        if st.done[row]:
            continue
        if token == rt.tok.eos_token_id:
            feedback[1, row] = 1
            continue
        feedback[0, row] = token
        feedback[1, row] = int(_stopped(rt, st.requests[row], st.generated[row] + [token]))
    return feedback


def _apply(st: _Decoding, feedback: torch.Tensor) -> None:
    for row, (token, done) in enumerate(zip(feedback[0].tolist(), feedback[1].tolist())):
        if token != _NONE:
            st.generated[row].append(token)
        st.done[row] = bool(done)


def _step(rt: Runtime, link: Any, st: _Decoding) -> None:
    ids, mask, last = _inputs(rt, st)
    attach = contextlib.nullcontext()
    if st.store is not None:
        from nanotron.generation.generate_store import attach_store

        attach = attach_store(rt.llama, st.store)
    with attach:
        x = ids.to(rt.device) if rt.stage.is_first else None
        logits = run_stage(rt.stage, link, x, mask.to(rt.device))
    st.step += 1
    if logits is None:
        st.awaiting_feedback = True
        return
    picked = logits[last.to(logits.device), torch.arange(len(st.rows), device=logits.device)]
    feedback = _decide(rt, st, greedy_tokens(picked, rt.mesh.tp_group).tolist())
    others = [r for r in rt.chain_pp_ranks if r != rt.mesh.pp_rank]
    link.send_feedback(feedback, others)
    _apply(st, feedback)


def _local_generations(rt: Runtime, plan: GenerationPlan) -> dict[int, list[int]] | None:
    if rt.stage is None:
        return None
    link = rt.new_link()
    queue = [_Decoding.start(batch, rt.kv_cache) for batch in plan.batches]
    finished: dict[int, list[int]] = {}
    while queue:
        st = queue.pop(0)
        if st.awaiting_feedback:
            _apply(st, link.recv_feedback((2, len(st.requests)), rt.mesh.output_pp_rank))
            st.awaiting_feedback = False
        if all(st.done):
            finished.update({r.index: g for r, g in zip(st.requests, st.generated)})
            continue
        _step(rt, link, st)
        rt.sync_pipeline()
        queue.append(st)
    link.flush()
    return finished if rt.mesh.holds_results else None


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    cuts = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(cuts)] if cuts else text


def run_generation(rt: Runtime, plan: GenerationPlan) -> list[ModelResponse]:
    """Responses in the order of the plan's docs; `text` has stop sequences (and after) removed."""
    payload = _local_generations(rt, plan)
    gathered = rt.mesh.gather(payload, to_all=rt.config.gather_to == "all")
    if gathered is None:
        return []
    tokens: dict[int, list[int]] = {}
    for part in gathered:
        tokens.update(part or {})
    return [
        ModelResponse(
            input=r.context,
            input_tokens=list(r.input_ids),
            text=[_cut_at_stop(rt.tok.decode(tokens[r.index]), r.stop_sequences)],
            output_tokens=[tokens[r.index]],
            truncated_tokens_count=r.truncated_tokens_count,
            padded_tokens_count=plan.padded_tokens_count.get(r.index, 0),
        )
        for r in plan.requests
    ]
