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

A bad config (a wrong value, a misspelled key, a layout that does not match the number of
processes) is found before any process starts training and reported as one `error:` line, printed
once, with exit code 2; so is any error of this library raised on the ranks (e.g. a task that
cannot be prepared).
"""

import argparse
import os
import sys
from datetime import timedelta
from typing import Any, List

from lighteval_nanotron.errors import LightevalNanotronError
from lighteval_nanotron.parallel.distributed import free_loopback_port, local_rank_env
from lighteval_nanotron.parallel.launch_env import apply_launcher_env

DEFAULT_TIMEOUT_S = 1800
USAGE_ERROR = 2
"""Exit code of a run stopped by a bad config or another error with a fix (`LightevalNanotronError`)."""


class ReportedError(Exception):
    """A rank stopped with a `LightevalNanotronError`; `message` is its one-line description."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def train(config_file: str, cpu: bool = False, timeout_s: int = DEFAULT_TIMEOUT_S) -> Any:
    """Build an `EvaluatingTrainer` from `config_file` and train it (every rank calls this)."""
    apply_launcher_env()
    if cpu:
        from lighteval_nanotron.cpu import enable_cpu_support
        from lighteval_nanotron.parallel.distributed import init_process_group_from_env

        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=timeout_s))
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.hook.training_data.dataloader import build_dataloader

    trainer = EvaluatingTrainer(config_file)
    trainer.train(build_dataloader(trainer, cpu))
    return trainer


def _spawned_rank(rank: int, world_size: int, port: int, config_file: str, timeout_s: int, errors: Any) -> None:
    os.environ.update(local_rank_env(rank, world_size, port))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    try:
        train(config_file, cpu=True, timeout_s=timeout_s)
    except LightevalNanotronError as error:
        errors.put(str(error))
        sys.exit(USAGE_ERROR)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch_cpu(config_file: str, nproc: int, timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
    """Run `train(config_file, cpu=True)` on `nproc` local gloo processes; raises if any rank fails
    (`ReportedError` when it stopped with one of this library's errors)."""
    import torch.multiprocessing as mp

    port = free_loopback_port()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    errors = mp.get_context("spawn").SimpleQueue()
    try:
        mp.start_processes(
            _spawned_rank,
            args=(nproc, port, config_file, timeout_s, errors),
            nprocs=nproc,
            join=True,
            start_method="spawn",
        )
    except mp.ProcessExitedException as failure:
        if failure.exit_code == USAGE_ERROR and not errors.empty():
            raise ReportedError(errors.get()) from failure
        raise


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
    """Entry point shared with `lighteval-nanotron train`; every torchrun rank calls it."""
    from lighteval_nanotron.hook.config_check import check_training_config

    if not os.path.isfile(args.config_file):
        return _usage_error(f"config file {args.config_file} does not exist: pass the path of a training YAML.")
    if args.nproc is not None and not args.cpu:
        return _usage_error("--nproc starts local CPU processes: add --cpu, or launch with torchrun.")
    world_size = args.nproc if args.nproc is not None else _torchrun_world_size()
    try:
        check_training_config(args.config_file, world_size)
        if args.nproc is not None:
            launch_cpu(args.config_file, args.nproc, args.timeout_s)
        else:
            train(args.config_file, cpu=args.cpu, timeout_s=args.timeout_s)
    except ReportedError as error:
        return _usage_error(error.message)
    except LightevalNanotronError as error:
        return _usage_error(str(error))
    return 0


def _torchrun_world_size() -> int | None:
    value = os.environ.get("WORLD_SIZE")
    return int(value) if value and value.isdigit() else None


def _usage_error(message: str) -> int:
    """Print `error: <message>` once (world rank 0 under torchrun); the exit code of every rank."""
    if os.environ.get("RANK", "0") == "0":
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
