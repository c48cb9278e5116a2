"""Train with Nanotron and evaluate in the loop (Nanotron's `run_train.py`, with the hook).

Usage:
    # GPUs, one process per GPU:
    torchrun --nproc_per_node 8 -m lighteval_nanotron.training.run_train \\
        --config-file configs/llama_1b_train_with_eval.yaml
    # CPU (gloo), 4 local processes started for you:
    OMP_NUM_THREADS=1 python -m lighteval_nanotron.training.run_train \\
        --config-file configs/tiny_cpu_train.yaml --cpu --nproc 4

The config is a Nanotron training YAML; its `lighteval_nanotron:` section (see docs/hook.md)
turns evaluation on. Without `--nproc`, launch with torchrun, or with a plain `srun` (one task per
process: RANK, WORLD_SIZE, LOCAL_RANK and MASTER_* come from SLURM's variables, see
lighteval_nanotron/parallel/launch_env.py and examples/train_with_eval.sbatch).

A bad config (a wrong value, a misspelled key, a layout that does not match the number of
processes) is found before any process starts training and reported as one `error:` line, printed
once, with exit code 2; so is any error of this library raised on the ranks (e.g. a task that
cannot be prepared). A rank of `--nproc` that dies (killed by a signal, out of memory) or raises
anything else ends the run with one `error:` line naming the rank and what happened, exit code 1
(the traceback with LIGHTEVAL_NANOTRON_TRACEBACK=1); see `lighteval_nanotron.console_errors`.
"""

import argparse
import logging
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any, List

from lighteval_nanotron.console_errors import (
    INTERNAL_ERROR,
    USAGE_ERROR,
    OneLineErrorParser,
    print_error,
    report_exception,
    wants_traceback,
)
from lighteval_nanotron.errors import LightevalNanotronError
from lighteval_nanotron.nanotron_compat.console import add_verbose_flag, is_verbose, quiet_process, set_verbose
from lighteval_nanotron.options.flags import expanded_path
from lighteval_nanotron.parallel.cpu_threads import configure_cpu_threads, prefer_passive_wait
from lighteval_nanotron.parallel.distributed import free_loopback_port, init_process_group_from_env, local_rank_env
from lighteval_nanotron.parallel.launch_env import apply_launcher_env

DEFAULT_TIMEOUT_S = 1800


class ReportedError(Exception):
    """A spawned rank stopped: `message` says which and why in one line, `exit_code` is the run's."""

    def __init__(self, message: str, exit_code: int = USAGE_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def train(config_file: str, cpu: bool = False, timeout_s: int = DEFAULT_TIMEOUT_S) -> Any:
    """Build an `EvaluatingTrainer` from `config_file` and train it (every rank calls this)."""
    apply_launcher_env()
    if cpu:
        from lighteval_nanotron.cpu import enable_cpu_support

        enable_cpu_support()
        init_process_group_from_env(backend="gloo", timeout=timedelta(seconds=timeout_s))
    from lighteval_nanotron.hook.trainer import EvaluatingTrainer
    from lighteval_nanotron.training.data.dataloader import build_dataloader

    trainer = EvaluatingTrainer(config_file)
    trainer.train(build_dataloader(trainer, cpu))
    return trainer


def _spawned_rank(rank: int, world_size: int, port: int, config_file: str, timeout_s: int, errors: str) -> None:
    os.environ.update(local_rank_env(rank, world_size, port))
    quiet_process()
    import torch.distributed as dist

    configure_cpu_threads()
    try:
        train(config_file, cpu=True, timeout_s=timeout_s)
    except LightevalNanotronError as error:
        # a file, not a multiprocessing queue: a rank killed later would leave the queue's semaphores
        # to the resource tracker, which complains after the run's error line
        # written whole, then renamed: the parent may read the files while another rank still writes its own
        message = Path(errors) / f"rank-{rank}.txt"
        partial = message.with_suffix(".partial")
        partial.write_text(str(error), encoding="utf-8")
        partial.replace(message)
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
    prefer_passive_wait()  # the ranks import torch after the spawn: their threads sleep when they wait
    errors = tempfile.TemporaryDirectory(prefix="lighteval_nanotron_errors_")
    # A rank that is killed leaves the semaphores it registered (tqdm's lock) to multiprocessing's
    # resource tracker, which would warn about them after the error line; the tracker starts with
    # the first rank and reads this.
    warning_filters = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(
        filter(None, [warning_filters, "ignore::UserWarning:multiprocessing.resource_tracker"])
    )
    spawn_log = logging.getLogger("torch.multiprocessing.spawn")
    level = spawn_log.level
    spawn_log.setLevel(logging.ERROR)  # "Terminating process ...": the summary below says the others were stopped
    try:
        mp.start_processes(
            _spawned_rank,
            args=(nproc, port, config_file, timeout_s, errors.name),
            nprocs=nproc,
            join=True,
            start_method="spawn",
        )
    except mp.ProcessExitedException as failure:
        own = Path(errors.name) / f"rank-{failure.error_index}.txt"
        reported = [own] if own.exists() else sorted(Path(errors.name).glob("rank-*.txt"))
        if failure.exit_code == USAGE_ERROR and reported:
            raise ReportedError(reported[0].read_text(encoding="utf-8")) from failure
        raise ReportedError(_exit_summary(failure), INTERNAL_ERROR) from failure
    except mp.ProcessRaisedException as failure:
        if wants_traceback():
            print(failure.msg, file=sys.stderr)
        raise ReportedError(_raised_summary(failure), INTERNAL_ERROR) from failure
    finally:
        spawn_log.setLevel(level)
        errors.cleanup()
        if warning_filters is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = warning_filters


_STOPPED = (
    "; the other ranks were stopped. Checkpoints and evaluation results already written are kept: resume from the "
    "last checkpoint (checkpoints.resume_checkpoint_path)."
)


def _exit_summary(failure: Any) -> str:
    """One line for a rank that died (a signal) or exited with a status and no message."""
    rank = f"training rank {failure.error_index} (pid {failure.error_pid})"
    if failure.signal_name:
        oom = " (often the out-of-memory killer or a job limit: see dmesg)" if failure.signal_name == "SIGKILL" else ""
        return f"{rank} was killed by {failure.signal_name}{oom}{_STOPPED}"
    return f"{rank} exited with status {failure.exit_code}{_STOPPED}"


def _raised_summary(failure: Any) -> str:
    """One line for a rank that raised something other than this library's errors: the last line of
    its traceback (`Type: message`)."""
    lines = [line for line in str(failure.msg).splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "an exception"
    hint = "" if wants_traceback() else " (set LIGHTEVAL_NANOTRON_TRACEBACK=1 for its traceback)"
    return f"training rank {failure.error_index} (pid {failure.error_pid}) failed: {last}{hint}" + _STOPPED


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or OneLineErrorParser(
        prog="python -m lighteval_nanotron.training.run_train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config-file",
        required=True,
        type=lambda value: str(expanded_path(value)),  # `--config-file=~/x.yaml`: no shell expanded it
        help="Nanotron training YAML with a lighteval_nanotron section",
    )
    parser.add_argument("--cpu", action="store_true", help="train on CPU with gloo (patches Nanotron for CPU)")
    parser.add_argument("--nproc", type=int, default=None, help="with --cpu: start this many local processes")
    parser.add_argument(
        "--timeout-s",
        type=int,
        default=DEFAULT_TIMEOUT_S,
        help="gloo collective timeout in seconds (with --cpu; default: %(default)s)",
    )
    return parser


def main(argv: List[str] | None = None) -> int:
    parser = build_parser()
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    set_verbose(args.verbose or is_verbose())
    quiet_process()
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Entry point shared with `lighteval-nanotron train`; every torchrun rank calls it."""
    from lighteval_nanotron.training.config_check import check_training_config
    from lighteval_nanotron.training.preflight import check_evaluation_inputs, check_launch

    if not os.path.isfile(args.config_file):
        return _usage_error(f"config file {args.config_file} does not exist: pass the path of a training YAML.")
    if args.nproc is not None and not args.cpu:
        return _usage_error("--nproc starts local CPU processes: add --cpu, or launch with torchrun.")
    try:
        apply_launcher_env()
        world_size = args.nproc if args.nproc is not None else _torchrun_world_size()
        config = check_training_config(args.config_file, world_size)
        check_launch(args.config_file, config, args.cpu, args.nproc)
        check_evaluation_inputs(config)
        if args.nproc is not None:
            launch_cpu(args.config_file, args.nproc, args.timeout_s)
        elif "WORLD_SIZE" in os.environ:
            train(args.config_file, cpu=args.cpu, timeout_s=args.timeout_s)
        else:  # one process, no launcher: a world of one
            os.environ.update(local_rank_env(0, 1, free_loopback_port()))
            train(args.config_file, cpu=args.cpu, timeout_s=args.timeout_s)
    except ReportedError as error:
        print_error(error.message)
        return error.exit_code
    except Exception as error:  # noqa: BLE001 - every failure ends in one error line (console_errors)
        return report_exception(error)
    return 0


def _torchrun_world_size() -> int | None:
    value = os.environ.get("WORLD_SIZE")
    return int(value) if value and value.isdigit() else None


def _usage_error(message: str) -> int:
    """Print `error: <message>` once (world rank 0 under torchrun); the exit code of every rank."""
    print_error(message)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
