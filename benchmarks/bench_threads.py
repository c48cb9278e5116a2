"""How a CPU process's OpenMP threads wait, on a busy machine: matmul chains of SmolLM2-135M's
layer shapes (q/k/v, attention output, gate/up, down, SwiGLU between) at decode size (4 rows) and
prefill size (1,024 rows), timed in fresh processes per wait policy and thread count, with and
without busy background processes. Wall and CPU seconds, and CPU per wall second.

Usage (this 2-core machine; about a minute when the policies behave, several when they do not):
    python benchmarks/bench_threads.py                        # policies default, PASSIVE, ACTIVE at 2 threads; 1 thread
    python benchmarks/bench_threads.py --background-load 0,2 --threads 2 --policies default,PASSIVE

Why (docs/performance.md, "Threads on a busy machine"): libgomp's threads spin at the end of each
parallel region by default; with more runnable threads than cores, a region then lasts a
scheduler time slice. `lighteval_nanotron.parallel.cpu_threads` sets PASSIVE for CPU ranks.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

DECODE_ROWS, PREFILL_ROWS = 4, 1024
LAYERS = 30


def _chain(threads: int, decode_steps: int, prefill_chunks: int) -> dict:
    """In a fresh process (the policy is read when torch loads): seconds of each chain."""
    import torch

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    qkv, o, gate_up, down = (
        torch.randn(shape, generator=generator) * 0.02
        for shape in ((576, 960), (576, 576), (576, 3072), (1536, 576))
    )

    def layer(x: torch.Tensor) -> torch.Tensor:
        x = (x @ qkv)[:, :576] @ o
        h = x @ gate_up
        return torch.nn.functional.silu(h[:, :1536]) * h[:, 1536:] @ down

    figures = {}
    for name, rows, repeats in (("decode", DECODE_ROWS, decode_steps), ("prefill", PREFILL_ROWS, prefill_chunks)):
        x = torch.randn(rows, 576, generator=generator)
        for _ in range(LAYERS):
            layer(x)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(repeats * LAYERS):
            layer(x)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        figures[name] = {"wall_s": wall, "cpu_s": cpu, "cpu_per_wall": cpu / wall}
    return figures


def _spin(parent: int) -> None:
    while os.getppid() == parent:
        for _ in range(1_000_000):
            pass


def _measure(policy: str, threads: int, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["OMP_NUM_THREADS"] = str(threads)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    code = (
        f"import json, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import bench_threads; "
        f"print(json.dumps(bench_threads._chain({threads}, {args.decode_steps}, {args.prefill_chunks})))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode:
        raise SystemExit(f"error: the {policy} / {threads}-thread run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", default="default,PASSIVE,ACTIVE", help="OMP_WAIT_POLICY values (default: unset)")
    parser.add_argument("--threads", default="2,1", help="comma list of thread counts (1 runs with the default policy)")
    parser.add_argument("--background-load", default="0,2", help="comma list of busy-process counts")
    parser.add_argument("--decode-steps", type=int, default=60, help="decode steps of 30 layers")
    parser.add_argument("--prefill-chunks", type=int, default=3, help="1,024-row chunks of 30 layers")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")
    print(f"{'load':>4} {'policy':>8} {'thr':>3} {'decode s':>9} {'CPU s':>7} {'CPU/s':>6} {'prefill s':>10} "
          f"{'CPU s':>7} {'CPU/s':>6} {'loadavg':>7}")  # fmt: skip
    for load in (int(v) for v in args.background_load.split(",")):
        spinners = [context.Process(target=_spin, args=(os.getpid(),), daemon=True) for _ in range(load)]
        for proc in spinners:
            proc.start()
        try:
            for threads in (int(v) for v in args.threads.split(",")):
                for policy in args.policies.split(",") if threads > 1 else ["default"]:
                    f = _measure(policy, threads, args)
                    d, p = f["decode"], f["prefill"]
                    print(
                        f"{load:>4} {policy:>8} {threads:>3} {d['wall_s']:>9.2f} {d['cpu_s']:>7.2f} "
                        f"{d['cpu_per_wall']:>6.2f} {p['wall_s']:>10.2f} {p['cpu_s']:>7.2f} {p['cpu_per_wall']:>6.2f} "
                        f"{os.getloadavg()[0]:>7.2f}",
                        flush=True,
                    )
        finally:
            for proc in spinners:
                proc.kill()
                proc.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
