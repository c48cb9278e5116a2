"""Bytes moved by the results gather of one evaluation, at DP1/2/4 on CPU, for the same docs.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/gather_bytes.py                 # DP1, DP2, DP4
    OMP_NUM_THREADS=1 python benchmarks/gather_bytes.py --dp 2 --max-samples 50

A random tiny Llama (hidden 64, 4 layers, the shipped 1024-token tokenizer) evaluates the same
docs of arc:easy, piqa, hellaswag (log-likelihood) and gsm8k (generation, 16 new tokens) from
the bundled slices. Each rank records what `Mesh.gather` moves (`record_gather_bytes`) during one
`pipeline.run()`, and what the previous payload would have been (two dense Python lists of every
slot from every replica: the log-likelihood payload before sparse gathering; the generation
payload is unchanged). It prints, per DP size, the bytes the reporting rank receives:
    dense, all-gather   the previous Python-API default (every rank receives every payload)
    dense, to reporting the previous hook / eval setting
    sparse, to reporting now (the default)
Bytes moved over the network are what the non-receiving ranks send; a rank's own payload is free.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import pickle
import sys
from pathlib import Path

if importlib.util.find_spec("lighteval_nanotron") is None:  # run from a source checkout without install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
TASKS = "lighteval|arc:easy|0,lighteval|piqa|0,leaderboard|hellaswag|0,lighteval|gsm8k|0"
VOCAB = 1024


def _tiny_llama_config():
    from nanotron.config import LlamaConfig

    return LlamaConfig(
        bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1,
        hidden_size=64,
        intermediate_size=128,
        max_position_embeddings=512,
        num_attention_heads=4,
        num_hidden_layers=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        vocab_size=VOCAB,
    )


def _dense_bytes(num_slots: int) -> int:
    """The previous scoring payload of one replica: (sums, misses) as Python lists of every slot."""
    return len(pickle.dumps(([slot + 0.5 for slot in range(num_slots)], [0] * num_slots)))


def _rank(rank: int, dp: int, port: int, max_samples: int, results) -> None:
    from lighteval_nanotron.parallel.distributed import local_rank_env

    os.environ.update(local_rank_env(rank, dp, port))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_llama
    from lighteval_nanotron.cpu import enable_cpu_support
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.engine.scoring_plan import ScoringPlan
    from lighteval_nanotron.parallel.distributed import build_parallel_context
    from lighteval_nanotron.parallel.mesh import record_gather_bytes
    from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings, load_tasks
    from lighteval_nanotron.pipeline.pipeline import build_docs
    from lighteval_nanotron.tasks import set_data_dirs

    enable_cpu_support()
    try:
        context = build_parallel_context(1, 1, dp)
        torch.manual_seed(0)
        model = build_nanotron_llama(_tiny_llama_config(), context)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(REPO / "configs" / "tiny_tokenizer"))
        set_data_dirs(["bundled"])
        config = EngineConfig(default_max_new_tokens=16)
        engine = NanotronLightevalModel(model, context, tokenizer, config)
        tasks = load_tasks(TASKS)
        built = build_docs(tasks, max_samples)  # the same docs on every rank (a deterministic subset)
        for task_docs in built.values():
            for doc in task_docs.docs:
                doc.generation_size = min(doc.generation_size or 16, 16)
        pipeline = EvaluationPipeline.prepare(engine, tasks, PipelineSettings(max_samples=max_samples, docs=built))
        with record_gather_bytes() as record:
            pipeline.run()
        holds = engine.runtime.mesh.holds_results
        previous = [
            (_dense_bytes(plan.num_slots) if holds else len(pickle.dumps(None)))
            if isinstance(plan, ScoringPlan)
            else size
            for plan, size in zip(pipeline.prepared.plans, record.payload_sizes, strict=True)
        ]
        docs = sum(len(d) for d in pipeline.docs.values())
        results.put((rank, engine.is_reporting_rank, record.payload_sizes, previous, docs))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def measure(dp: int, max_samples: int) -> dict:
    from lighteval_nanotron.parallel.distributed import free_loopback_port

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_loopback_port()
    procs = [context.Process(target=_rank, args=(r, dp, port, max_samples, results)) for r in range(dp)]
    for proc in procs:
        proc.start()
    rows = sorted(results.get(timeout=900) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
    others = [row for row in rows if not row[1]]
    now = sum(sum(row[2]) for row in others)
    dense_reporting = sum(sum(row[3]) for row in others)
    dense_all = sum(sum(row[3]) for row in rows) * (dp - 1)
    return {
        "dp": dp,
        "docs": rows[0][4],
        "payload_per_replica": [sum(row[2]) for row in rows],
        "dense_all_gather": dense_all,
        "dense_to_reporting": dense_reporting,
        "sparse_to_reporting": now,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dp", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--max-samples", type=int, default=100, help="docs per task (gsm8k: the same)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    header = ("DP", "docs", "dense, all-gather (B)", "dense, to reporting (B)", "sparse, to reporting (B)")
    header += ("per replica (B)",)
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|---|---|---|")
    for dp in args.dp:
        m = measure(dp, args.max_samples)
        print(
            f"| {m['dp']} | {m['docs']} | {m['dense_all_gather']:,} | {m['dense_to_reporting']:,} | "
            f"{m['sparse_to_reporting']:,} | {', '.join(f'{b:,}' for b in m['payload_per_replica'])} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
