"""Train with Nanotron and evaluate in the loop (Nanotron's `run_train.py`, with the hook).

Usage:
    # GPUs, one process per GPU:
    torchrun --nproc_per_node 8 -m lighteval_nanotron.hook.run_train \
        --config-file configs/llama_1b_train_with_eval.yaml
    # CPU (gloo), 4 local processes started for you:
    OMP_NUM_THREADS=1 python -m lighteval_nanotron.hook.run_train \
        --config-file configs/tiny_cpu_train.yaml --cpu --nproc 4

The config is a Nanotron training YAML; its `lighteval_nanotron:` section (see docs/hook.md)
turns evaluation on. Without `--nproc`, launch with torchrun, or with a plain `srun` (one task per
process: RANK, WORLD_SIZE, LOCAL_RANK and MASTER_* come from SLURM's variables, see
lighteval_nanotron/parallel/launch_env.py and examples/train_with_eval.sbatch).
"""

import argparse
import os
import sys
from datetime import timedelta
from typing import Any, List

from lighteval_nanotron.parallel.distributed import free_loopback_port, local_rank_env
from lighteval_nanotron.parallel.launch_env import apply_launcher_env

DEFAULT_TIMEOUT_S = 1800


def train(config_file: str, cpu: bool = False, timeout_s: int = DEFAULT_TIMEOUT_S) -> Any:
    """Build an `EvaluatingTrainer` from `config_file` and train it (every rank calls this)."""
    apply_launcher_env()
    if cpu:
        from lighteval_nanotron.parallel.cpu import enable_cpu_support
        from lighteval_nanotron.parallel.distributed import init_process_group_from_env

        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=timeout_s))
    from lighteval_nanotron.hook.data import build_dataloader
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer

    trainer = EvaluatingTrainer(config_file)
    trainer.train(build_dataloader(trainer, cpu))
    return trainer


def _spawned_rank(rank: int, world_size: int, port: int, config_file: str, timeout_s: int) -> None:
    os.environ.update(local_rank_env(rank, world_size, port))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    try:
        train(config_file, cpu=True, timeout_s=timeout_s)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch_cpu(config_file: str, nproc: int, timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
    """Run `train(config_file, cpu=True)` on `nproc` local gloo processes; raises if any rank fails."""
    import torch.multiprocessing as mp

    port = free_loopback_port()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.start_processes(
        _spawned_rank, args=(nproc, port, config_file, timeout_s), nprocs=nproc, join=True, start_method="spawn"
    )


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="python -m lighteval_nanotron.hook.run_train", description=__doc__)
    parser.add_argument("--config-file", required=True, help="Nanotron training YAML with a lighteval_nanotron section")
    parser.add_argument("--cpu", action="store_true", help="train on CPU with gloo (patches Nanotron for CPU)")
    parser.add_argument("--nproc", type=int, default=None, help="with --cpu: start this many local processes")
    parser.add_argument(
        "--timeout-s", type=int, default=DEFAULT_TIMEOUT_S, help="gloo collective timeout in seconds (with --cpu)"
    )
    return parser


def main(argv: List[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Entry point shared with `lighteval-nanotron train`."""
    if not os.path.isfile(args.config_file):
        print(f"error: config file {args.config_file} does not exist.", file=sys.stderr)
        return 2
    if args.nproc is not None:
        if not args.cpu:
            print("error: --nproc starts local CPU processes: add --cpu, or launch with torchrun.", file=sys.stderr)
            return 2
        launch_cpu(args.config_file, args.nproc, args.timeout_s)
    else:
        train(args.config_file, cpu=args.cpu, timeout_s=args.timeout_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
