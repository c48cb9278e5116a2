"""Decoding of a generation plan across the pipeline: greedy, or seeded sampling per row.

Every stage of a replica keeps the same decoding state for each micro-batch. The output stage
picks the next tokens (vocabulary-parallel argmax; rows that sample gather their full-vocabulary
fp32 logits and draw with `sampling.sample_token`, seeded by the row's stream and the index of
the token, so the draw does not depend on the batch or the layout), decides which rows are done (EOS, the row's
`max_new_tokens`, one of its stop sequences, or the context window full) and sends
`[tokens; done]` to the other stages, which apply it before that micro-batch's next step.
Micro-batches are visited round-robin, so while one waits for its tokens the stages work on
others. A pool (or micro-batch) leaves as soon as all its rows are done.

With `kv_cache` the rows run in decoding pools (one per pipeline stage): waiting rows, longest
first, start when slots are free (an unpadded causal prefill into the pool's `PoolCache`, a few
rows per step so that pipeline stages overlap on the prefills too),
then every running row gets one token per step at its own position; with `drop_finished_rows`
rows that are done leave at once (every stage drops the same cache rows and starts the same
waiting rows, since every stage applies the same feedback). Without the cache every step
recomputes the right-padded sequences of a micro-batch's running rows through Nanotron's forward. The stop check is
incremental: only the newest tokens' text is searched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from lighteval_nanotron.models.engine.batching import round_up
from lighteval_nanotron.models.engine.decode_attention import CachedDecode, CausalPrefill, PoolCache
from lighteval_nanotron.models.engine.generation_plan import GenerationPlan, GenRequest
from lighteval_nanotron.models.engine.runtime import Runtime
from lighteval_nanotron.models.engine.sampling import sample_token, step_seed
from lighteval_nanotron.models.engine.scoring_plan import PlanStats
from lighteval_nanotron.parallel.stages import StageLink, check_leading, run_stage, stage_input
from lighteval_nanotron.parallel.vocab_parallel import full_vocabulary, greedy_choice
from lighteval_nanotron.requests import ModelResponse

_NONE = -1


@dataclass
class _Decoding:
    """One decoding pool (with the cache) or micro-batch (without): its rows and their state.

    With the cache, rows start in `waiting` (longest first) and join the running rows (`active`,
    in cache order) when a slot is free: a prefill step for the joining rows, then decode steps
    for all running rows. Rows that are done leave (`drop_finished_rows`), freeing their slots.
    """

    requests: list[GenRequest]
    generated: list[list[int]]
    done: list[bool]
    waiting: list[int] = field(default_factory=list)
    cache: PoolCache | None = None
    capacity: int = 0  # cache slots per row: longest context + most new tokens (rows kept after done fit)
    active: list[int] = field(default_factory=list)  # requests whose rows are in the cache, in order
    step: int = 0
    awaiting_feedback: bool = False
    rows: list[int] = field(default_factory=list)  # request of each row fed at the current step
    joining: torch.Tensor | None = None  # context lengths of the rows the current prefill step adds
    stats: PlanStats = field(default_factory=PlanStats)
    non_finite: set[int] = field(default_factory=set)  # requests that met NaN/inf logits (output stage only)
    padded: dict[int, int] = field(default_factory=dict)  # request -> pad tokens of its prefill
    processed: list[int] = field(default_factory=list)  # token positions fed for each request

    @classmethod
    def start(cls, requests: list[GenRequest]) -> "_Decoding":
        capacity = max(r.token_length for r in requests) + max(r.generation_size for r in requests)
        return cls(
            requests,
            [[] for _ in requests],
            [False] * len(requests),
            list(range(len(requests))),
            capacity=capacity,
            processed=[0] * len(requests),
        )


@dataclass
class _Inputs:
    ids: torch.Tensor  # [rows, seq]
    last: torch.Tensor  # [n] position whose logits give the next token of each request fed
    fed: list[int]  # token positions fed for each request of `st.rows`
    row_of: torch.Tensor | None = None  # [n] row of `ids` holding each `last` (None: request k in row k)
    tree: object | None = None  # what the decoder layers run with (`run_layer`), None: Nanotron's forward

    @property
    def last_rows(self) -> torch.Tensor:
        """[n] row of `ids` holding each `last`."""
        return torch.arange(self.ids.shape[0]) if self.row_of is None else self.row_of


def _slots(rt: Runtime, st: _Decoding) -> int:
    """Rows a pool may run at once: `max_rows_per_batch`, and the cache budget in tokens."""
    return max(1, min(rt.config.max_rows_per_batch, rt.config.generation_kv_tokens // st.capacity))


def _leave(rt: Runtime, st: _Decoding) -> None:
    """Finished rows leave the cache (all together, once every one is done, without
    `drop_finished_rows`); the last running rows move into their slots."""
    gone = [k for k, i in enumerate(st.active) if st.done[i]]
    if not gone or (not rt.config.drop_finished_rows and len(gone) < len(st.active)):
        return
    st.active = [st.active[k] for k in st.cache.drop_rows(gone)]


def _joining(rt: Runtime, st: _Decoding) -> list[int]:
    """Waiting rows that start now, in order (longest first within a task): as many as there are
    free slots and the prefill budget (their tokens <= `prefill_tokens` and
    `tokens_per_batch`; a longer row alone) allows."""
    free = _slots(rt, st) - len(st.active)
    budget = min(rt.config.prefill_tokens, rt.config.tokens_per_batch)
    taken: list[int] = []
    tokens = 0
    for i in st.waiting[:free]:
        tokens += st.requests[i].token_length
        if taken and tokens > budget:
            break
        taken.append(i)
    return taken


def _prefill(rt: Runtime, st: _Decoding, joining: list[int]) -> _Inputs:
    """The joining rows' contexts, concatenated without padding, causal within each row, into the
    pool's free slots."""
    del st.waiting[: len(joining)]
    st.rows = joining
    seqs = [st.requests[i].input_ids for i in joining]
    lengths = [len(s) for s in seqs]
    ids = torch.tensor([token for seq in seqs for token in seq], dtype=torch.long)[None]
    st.joining = torch.tensor(lengths, device=rt.device)
    st.padded.update({i: 0 for i in joining})
    pairs = sum(n * (n + 1) // 2 for n in lengths)
    st.stats.add(PlanStats(attention_pairs=pairs, rows=len(seqs), batches=1))
    last = torch.tensor(lengths).cumsum(0) - 1
    tree = CausalPrefill(st.cache, st.cache.rows, lengths)
    return _Inputs(ids, last, lengths, torch.zeros(len(lengths), dtype=torch.long), tree)


def _decode_step(rt: Runtime, st: _Decoding) -> _Inputs:
    """One new token per running row, attending to the cache."""
    st.rows = list(st.active)
    last = [(st.generated[i] or list(st.requests[i].input_ids))[-1] for i in st.rows]
    tree = CachedDecode.build(st.cache)
    st.cache.lengths = st.cache.lengths + 1
    cached = int(tree.lengths.sum())
    st.stats.add(PlanStats(attention_pairs=cached + len(st.rows), decode_steps=1, decode_cache_positions=cached))
    ids = torch.tensor(last, dtype=torch.long)[:, None]
    return _Inputs(ids, torch.zeros(len(last), dtype=torch.long), [1] * len(last), tree=tree)


def _cached_inputs(rt: Runtime, st: _Decoding) -> _Inputs:
    """A prefill step when rows can join, else a decode step; the previous prefill's rows join first."""
    if st.cache is None:
        slots = min(_slots(rt, st), len(st.requests))
        st.cache = PoolCache(slots, st.capacity, torch.zeros(0, dtype=torch.long, device=rt.device))
    if st.joining is not None:
        st.cache.lengths = torch.cat([st.cache.lengths, st.joining])
        st.active += st.rows
        st.joining = None
    _leave(rt, st)
    joining = _joining(rt, st)
    if joining:
        return _prefill(rt, st, joining)
    return _decode_step(rt, st)


def _recompute(rt: Runtime, st: _Decoding) -> _Inputs:
    """Without the cache: the full right-padded sequences of the running rows (Nanotron's forward)."""
    st.rows = [i for i, done in enumerate(st.done) if not done]
    seqs = [list(st.requests[i].input_ids) + st.generated[i] for i in st.rows]
    width = round_up(max(len(s) for s in seqs), rt.pad_multiple)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, seq in enumerate(seqs):
        ids[r, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    real = sum(len(s) for s in seqs)
    st.stats.add(
        PlanStats(
            padding_tokens=width * len(seqs) - real,
            attention_pairs=len(seqs) * width * (width + 1) // 2,
            recomputed_steps=int(st.step > 0),
        )
    )
    return _Inputs(ids, torch.tensor([len(s) - 1 for s in seqs]), [width] * len(seqs))


def _inputs(rt: Runtime, st: _Decoding) -> _Inputs:
    return _cached_inputs(rt, st) if rt.kv_cache else _recompute(rt, st)


def _stop_window(request: GenRequest) -> int:
    """Tokens decoded to look for a stop sequence that ends in the newest token: enough to hold
    the longest stop sequence even at one byte per token, plus a margin for decoder context."""
    return 4 * max(len(stop) for stop in request.stop_sequences) + 8


def _stopped(rt: Runtime, request: GenRequest, tokens: list[int]) -> bool:
    """Incremental: a stop sequence is looked for only in the text of the newest tokens (the
    check runs after every token, so an earlier one would already have stopped the row)."""
    if len(tokens) >= request.generation_size or len(request.input_ids) + len(tokens) >= rt.max_length:
        return True
    if not request.stop_sequences:
        return False
    text = rt.tok.decode(tokens[-_stop_window(request) :])
    return any(stop in text for stop in request.stop_sequences)


def _decide(rt: Runtime, st: _Decoding, new_tokens: list[int]) -> torch.Tensor:
    """Feedback `[2, requests]`: the token appended to each request (or -1) and whether it is done."""
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


def _every_row_done(st: _Decoding) -> torch.Tensor:
    """Feedback that ends the pool: no token, every row done."""
    feedback = torch.full((2, len(st.requests)), _NONE, dtype=torch.long)
    feedback[1] = 1
    return feedback


def _apply(st: _Decoding, feedback: torch.Tensor) -> None:
    for row, (token, done) in enumerate(zip(feedback[0].tolist(), feedback[1].tolist())):
        if token != _NONE:
            st.generated[row].append(token)
        st.done[row] = bool(done)


def _step(rt: Runtime, link: StageLink, st: _Decoding, failed: bool) -> Exception | None:
    """One step of a pool on this stage. The output stage returns the error that stopped it (this
    step's after its activation arrived, or `failed`: an earlier one's) instead of raising: it then
    sends every row of the pool as done, so the other stages, which feed only running rows, stop
    feeding the pool, and no stage waits on it (see `_local_generations`)."""
    started = time.perf_counter()
    inputs = _inputs(rt, st)
    decoding = isinstance(inputs.tree, CachedDecode)
    rows, seq = inputs.ids.shape
    select = (inputs.last, inputs.last_rows) if rt.config.logits_at_targets else None
    mask = torch.ones((rows, seq), dtype=torch.bool, device=rt.device)
    leading = (seq, rows) if inputs.tree is not None else ()  # activations `[seq, rows, hidden]` (all-reduce form)
    x = stage_input(rt.stage, link, inputs.ids.to(rt.device), select, leading)
    st.stats.add(
        PlanStats(
            processed_tokens=rows * seq,
            logit_positions=len(inputs.last) if select is not None else rows * seq,
            batches=int(st.step == 0 and not rt.kv_cache),
            rows=rows * int(st.step == 0 and not rt.kv_cache),
        )
    )
    for row, fed in zip(st.rows, inputs.fed):
        st.processed[row] += fed
    st.step += 1
    if not rt.stage.is_last:
        run_stage(rt.stage, link, x, mask, inputs.tree, select, leading=leading)
        st.awaiting_feedback = True
        st.stats.decode_seconds += (time.perf_counter() - started) * decoding
        return None
    error = None
    if not failed:
        try:
            logits = run_stage(rt.stage, link, x, mask, inputs.tree, select, leading=leading)
            feedback = _decide(rt, st, _next_tokens(rt, st, logits, inputs, select))
        except Exception as caught:  # noqa: BLE001 - raised once the other stages are done (`_local_generations`)
            if rt.stage.is_first:
                raise
            error = caught
    if failed or error is not None:
        feedback = _every_row_done(st)
    link.send_feedback(feedback, [r for r in rt.chain_pp_ranks if r != rt.mesh.pp_rank])
    _apply(st, feedback)
    st.stats.decode_seconds += (time.perf_counter() - started) * decoding
    return error


def _picked(logits: torch.Tensor, inputs: _Inputs, select: tuple | None) -> torch.Tensor:
    """The logits `[rows fed, vocab / tp]` that choose each fed row's next token; LayoutError when
    the output stage's logits do not have this step's shape (`[n, 1]` selected, else `[seq, rows]`)."""
    expected = (len(inputs.last), 1) if select is not None else tuple(inputs.ids.shape[::-1])
    check_leading(logits.shape, expected, "The output stage's logits")
    if select is not None:
        return logits[:, 0]
    return logits[inputs.last.to(logits.device), inputs.last_rows.to(logits.device)]


def _next_tokens(rt: Runtime, st: _Decoding, logits: torch.Tensor, inputs: _Inputs, select: tuple | None) -> list[int]:
    """The token each fed row gets (greedy, or its seeded draw); rows whose logits hold NaN/inf are
    noted (`non_finite_logits` of their docs)."""
    picked = _picked(logits, inputs, select)
    tokens, max_logit = greedy_choice(picked, rt.mesh.tp_group)
    st.non_finite.update(st.rows[row] for row in (~torch.isfinite(max_logit)).nonzero().flatten().tolist())
    new_tokens = tokens.tolist()
    sampled = [k for k, i in enumerate(st.rows) if st.requests[i].sampling is not None]
    if sampled:
        _sample(rt, st, picked, sampled, new_tokens)
    return new_tokens


def _sample(rt: Runtime, st: _Decoding, picked: torch.Tensor, rows: list[int], new_tokens: list[int]) -> None:
    """Replace the greedy choice of the sampling `rows` by their seeded draws (identical on every
    TP rank: the same gathered logits and seeds)."""
    full = full_vocabulary(picked[rows], rt.mesh.tp_group)
    for k, row in enumerate(rows):
        request = st.requests[st.rows[row]]
        seed = step_seed(request.seed_stream, len(st.generated[st.rows[row]]))
        new_tokens[row] = sample_token(full[k], request.sampling, seed)


Key = tuple[int, int]  # (doc index, sample index)


def _local_generations(rt: Runtime, plan: GenerationPlan) -> tuple | None:
    """This replica's generations on this stage (None on stages that hold no results).

    A failure on the output stage after a step's activation arrived (mis-shaped logits, a
    tokenizer that cannot decode, ...) ends that pool and every later step of every pool: the
    output stage still receives what the other stages send and answers each step with all rows
    done, so every stage leaves this loop with nothing in flight; then it raises (and the run's
    agreement, `Runtime.agreed`, makes every rank raise together)."""
    if rt.stage is None:
        return None
    link = rt.new_link()
    queue = [_Decoding.start(batch) for batch in plan.batches]
    finished: dict[Key, list[int]] = {}
    non_finite: set[int] = set()
    padded: dict[int, int] = {}
    processed: dict[int, int] = {}  # doc index -> positions fed for all its samples
    stats = PlanStats()
    failure: Exception | None = None
    while queue:
        st = queue.pop(0)
        if st.awaiting_feedback:
            _apply(st, link.recv_feedback((2, len(st.requests)), rt.mesh.output_pp_rank))
            st.awaiting_feedback = False
        if all(st.done):
            rt.micro_batch_done(len(plan.batches) - len(queue), len(plan.batches))
            finished.update({(r.index, r.sample_index): g for r, g in zip(st.requests, st.generated)})
            non_finite.update(st.requests[row].index for row in st.non_finite)
            stats.add(st.stats)
            padded.update({st.requests[row].index: pads for row, pads in st.padded.items()})
            for request, fed in zip(st.requests, st.processed):
                processed[request.index] = processed.get(request.index, 0) + fed
            continue
        failure = _step(rt, link, st, failure is not None) or failure
        rt.sync_pipeline()
        queue.append(st)
    link.flush()
    if failure is not None:
        raise failure
    return (finished, stats, non_finite, padded, processed) if rt.mesh.holds_results else None


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    cuts = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(cuts)] if cuts else text


def _samples(request: GenRequest) -> int:
    return 1 if request.sampling is None else request.num_samples


def run_generation(rt: Runtime, plan: GenerationPlan) -> list[ModelResponse]:
    """Responses in the order of the plan's docs, one text per sample (`num_samples` when
    sampling, else one); `text` has stop sequences (and after) removed."""
    payload = rt.agreed(lambda: _local_generations(rt, plan), "generation")
    gathered = rt.mesh.gather(payload, to_all=rt.config.gather_to == "all")
    if gathered is None:
        return []
    tokens: dict[Key, list[int]] = {}
    non_finite: set[int] = set()
    processed: dict[int, int] = {}
    stats = PlanStats(docs=len(plan.requests))
    for part in gathered:
        if part is not None:
            tokens.update(part[0])
            stats.add(part[1])
            non_finite.update(part[2])
            plan.padded_tokens_count.update(part[3])
            processed.update(part[4])
    samples = {r.index: [tokens[(r.index, j)] for j in range(_samples(r))] for r in plan.requests}
    useful = [
        len(r.input_ids) * len(samples[r.index]) + sum(max(0, len(g) - 1) for g in samples[r.index])
        for r in plan.requests
    ]
    stats.useful_tokens = sum(useful)
    plan.stats = stats
    plan.doc_useful_tokens = useful
    plan.doc_processed_tokens = [float(processed[r.index]) for r in plan.requests]
    return [
        ModelResponse(
            input=r.context,
            input_tokens=list(r.input_ids),
            text=[_cut_at_stop(rt.tok.decode(g), r.stop_sequences) for g in samples[r.index]],
            output_tokens=samples[r.index],
            truncated_tokens_count=r.truncated_tokens_count,
            padded_tokens_count=plan.padded_tokens_count.get(r.index, 0),
            non_finite_logits=r.index in non_finite,
            unknown_tokens=[t for g in samples[r.index] for t in g if t >= rt.tokenizer_size],
        )
        for r in plan.requests
    ]
