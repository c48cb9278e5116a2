"""Patches that let Nanotron's `DistributedTrainer` (0.4, or GitHub main) train on CPU with gloo
(see docs/cpu.md).

The trainer creates `device="cuda"` tensors in a handful of places; each of those calls is
wrapped so that it runs under `cuda_to_cpu()` (cuda mapped to cpu while it runs). The random-init
path all-reduces parameters that require grad in place (`trainer.py:582,593`), which autograd only
allows under `no_grad`. Current Nanotron also times every step with CUDA timers
(`nanotron_timer(..., "cuda")`), which on a CPU fall back to CPU timers once and then refuse the
next "cuda" request for the same name: on the CPU every timer is asked for as a CPU timer. Import
this module only after `import_nanotron()`.
"""

import functools

import torch
from nanotron import sanity_checks, trainer
from nanotron.optim.gradient_accumulator import FP32GradientAccumulator

from lighteval_nanotron.nanotron_variant import installed_nanotron
from lighteval_nanotron.parallel.cpu.devices import on_cpu
from lighteval_nanotron.parallel.cpu.model_patches import replace


def _under_no_grad(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return method(*args, **kwargs)

    return wrapper


def apply_trainer_patches() -> None:
    """Place the trainer's own tensors on the CPU; make its parameter all-reduces legal under gloo."""
    trainer_class = trainer.DistributedTrainer
    replace(trainer_class, "_init_model", on_cpu(trainer_class._init_model))  # trainer.py:632-633
    replace(trainer_class, "_load_model_checkpoint", _under_no_grad(trainer_class._load_model_checkpoint))
    replace(FP32GradientAccumulator, "__init__", on_cpu(FP32GradientAccumulator.__init__))  # :95,173
    replace(trainer, "clip_grad_norm", on_cpu(trainer.clip_grad_norm))  # clip_grads.py:59,71
    replace(trainer, "sanity_check_dataloader", on_cpu(trainer.sanity_check_dataloader))  # dataloader.py:48
    replace(trainer, "init_random_states", on_cpu(trainer.init_random_states))  # random.py:142
    replace(trainer, "save", on_cpu(trainer.save))  # sanity_checks.py:245, serialize/main.py:178
    replace(trainer, "load_optimizer", on_cpu(trainer.load_optimizer))  # serialize/optimizer.py:233-234
    replace(sanity_checks, "check_optim_state_in_sync", on_cpu(sanity_checks.check_optim_state_in_sync))
    if installed_nanotron().name == "main" and not torch.cuda.is_available():
        from nanotron.logging.timers import Timers

        replace(Timers, "__call__", _cpu_timers(Timers.__call__))


def _cpu_timers(call):
    """`Timers.__call__` asking for a CPU timer whatever type the caller names."""

    @functools.wraps(call)
    def wrapper(self, name=None, timer_type="cpu", *args, **kwargs):
        return call(self, name, "cpu", *args, **kwargs)

    return wrapper
