"""Benchmark held-out loss against the same model's training forward and backward, on the same windows.

Usage (this 2-core CPU machine: one process, one thread; SmolLM2-135M's shape with random weights):
    OMP_NUM_THREADS=1 python benchmarks/bench_heldout.py --tokens 8192 --sequence-length 1024 --repeats 2
    OMP_NUM_THREADS=1 python benchmarks/bench_heldout.py --tiny          # the tiny test model, a few seconds

It builds the model at TP1/PP1 (Nanotron's `LlamaForTraining`), makes `--tokens` target tokens of random
token windows of `--sequence-length + 1` (the weights and tokens do not change the work), and alternates,
`--repeats` times: (a) the held-out evaluation of those windows through the engine (`prepare_held_out`
once, then `run`: whole windows, causal attention through the family's layer view, `lm_head` in chunks
into vocabulary-parallel target log-probs) and (b) Nanotron's own training forward and backward on the
same windows in micro-batches of the same size (`LlamaForTraining(input_ids, input_mask, label_ids,
label_mask)["loss"].backward()`, gradients dropped after each). It prints, per run and best of each:
wall and CPU seconds, target tokens/s per wall and per CPU second, held-out / training tokens/s, and the
held-out model FLOP/s over the fair matmul peak (`bench_eval.peak_for`: each of the model's GEMM shapes
at its best case on this thread, measured in the same run) per CPU second. `--out` writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_eval import SMOLLM2_SHAPE, _matmul_peaks, _model_flops, _randomize, _tiny_fields, peak_for  # noqa: E402


def _setup(tiny: bool) -> tuple[Any, Any, dict]:
    import torch

    from lighteval_nanotron.cpu import enable_cpu_support
    from lighteval_nanotron.parallel.distributed import build_parallel_context, free_loopback_port, local_rank_env

    os.environ.update(local_rank_env(0, 1, free_loopback_port()))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    enable_cpu_support()
    from nanotron.config import LlamaConfig

    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model

    context = build_parallel_context(1, 1, 1)
    fields = dict(_tiny_fields() if tiny else SMOLLM2_SHAPE)
    model = build_nanotron_model(LlamaConfig(**fields), context, torch.float32, torch.device("cpu"))
    _randomize(model)
    return model, context, fields


def _windows(fields: dict, tokens: int, length: int) -> Any:
    import numpy as np

    from lighteval_nanotron.requests.held_out import HeldOutSet

    count = max(1, tokens // length)
    windows = np.random.default_rng(0).integers(0, fields["vocab_size"], size=(count, length + 1)).astype(np.int32)
    return HeldOutSet("bench", windows, np.full(count, 4 * length, dtype=np.int64))


def _timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _training_pass(model: Any, windows: Any, rows: int) -> None:
    """Nanotron's training forward and backward over `windows`, `rows` windows per micro-batch."""
    import torch

    model.train()
    for first in range(0, len(windows), rows):
        block = torch.from_numpy(windows[first : first + rows]).long()
        inputs, labels = block[:, :-1], block[:, 1:]
        ones = torch.ones_like(inputs, dtype=torch.bool)
        loss = model(input_ids=inputs, input_mask=ones, label_ids=labels, label_mask=ones)["loss"]
        loss.backward()
        for param in model.parameters():
            param.grad = None


def run(args: argparse.Namespace) -> dict:
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel

    model, context, fields = _setup(args.tiny)
    held_out = _windows(fields, args.tokens, args.sequence_length)
    config = EngineConfig(tokens_per_batch=args.tokens_per_batch, max_length=args.sequence_length)
    engine = NanotronLightevalModel(model, context, _NoTokenizer(), config)
    plan = engine.prepare_held_out(held_out)
    rows = max(1, args.tokens_per_batch // args.sequence_length)
    target_tokens = held_out.target_tokens
    import torch

    best = _matmul_peaks(fields, torch.device("cpu"), torch.float32, 1)
    peak = peak_for(plan.stats, fields, best)
    flops = _model_flops(plan.stats, fields)
    engine.run(plan)  # warm-up (allocator, kernels)
    _training_pass(model, held_out.windows[:rows], rows)
    runs = []
    for repeat in range(args.repeats):
        wall, cpu = _timed(lambda: engine.run(plan))
        runs.append({"kind": "held-out", "repeat": repeat, "wall_s": wall, "cpu_s": cpu})
        wall, cpu = _timed(lambda: _training_pass(model, held_out.windows, rows))
        runs.append({"kind": "training fwd+bwd", "repeat": repeat, "wall_s": wall, "cpu_s": cpu})
    for record in runs:
        record["tokens_per_s"] = target_tokens / record["wall_s"]
        record["tokens_per_cpu_s"] = target_tokens / record["cpu_s"]
    best_of = {
        kind: min((r for r in runs if r["kind"] == kind), key=lambda r: r["cpu_s"])
        for kind in ("held-out", "training fwd+bwd")
    }
    held, train = best_of["held-out"], best_of["training fwd+bwd"]
    return {
        "model": "tiny test model" if args.tiny else "SmolLM2-135M's shape (random weights)",
        "sequence_length": args.sequence_length,
        "windows": int(held_out.windows.shape[0]),
        "target_tokens": target_tokens,
        "rows_per_micro_batch": rows,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "runs": runs,
        "speedup_wall": held["tokens_per_s"] / train["tokens_per_s"],
        "speedup_cpu": held["tokens_per_cpu_s"] / train["tokens_per_cpu_s"],
        "fair_peak_flops": peak,
        "matmul_best_flops": best,
        "held_out_flops_per_cpu_s": flops / held["cpu_s"],
        "fraction_of_peak_per_cpu_s": flops / held["cpu_s"] / peak,
        "fraction_of_peak_per_wall_s": flops / held["wall_s"] / peak,
    }


class _NoTokenizer:
    """The benchmark's windows are token ids already: the engine never tokenizes here."""

    eos_token_id = bos_token_id = 0

    def convert_tokens_to_ids(self, token: str) -> int:
        return 0


def report(result: dict) -> str:
    lines = [
        f"{result['model']}, TP1/PP1, {result['windows']} windows of {result['sequence_length']} targets "
        f"({result['target_tokens']} tokens), {result['rows_per_micro_batch']} windows per micro-batch, "
        f"{result['threads']} thread(s), load average {result['load_average']:.1f}",
        "| run | repeat | wall s | CPU s | tokens/s | tokens/CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['kind']} | {r['repeat']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['tokens_per_s']:.0f} | "
            f"{r['tokens_per_cpu_s']:.0f} |"
        )
    lines += [
        f"held-out / training fwd+bwd tokens/s (best of each): {result['speedup_wall']:.2f}x wall, "
        f"{result['speedup_cpu']:.2f}x per CPU second (target >= 2.5x)",
        f"held-out model FLOP/s per CPU second {result['held_out_flops_per_cpu_s']:.3g} over the fair matmul peak "
        f"{result['fair_peak_flops']:.3g}: {result['fraction_of_peak_per_cpu_s']:.2f} (target >= 0.75; "
        f"per wall second {result['fraction_of_peak_per_wall_s']:.2f})",
        "matmul best cases (FLOP/s): " + ", ".join(f"{k} {v:.3g}" for k, v in result["matmul_best_flops"].items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=8192, help="target tokens of held-out windows")
    parser.add_argument("--sequence-length", type=int, default=1024, help="targets per window")
    parser.add_argument("--tokens-per-batch", type=int, default=8192, help="tokens of one micro-batch (both sides)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating held-out / training runs")
    parser.add_argument("--tiny", action="store_true", help="the tiny test model instead of SmolLM2's shape")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    result = run(args)
    print(report(result), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
