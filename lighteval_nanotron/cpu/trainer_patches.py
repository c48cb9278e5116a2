"""Patches that let Nanotron's `DistributedTrainer` (0.4, or GitHub main) train on CPU with gloo
(see docs/cpu.md).

The trainer creates `device="cuda"` tensors in a handful of places; each of those calls is
wrapped so that it runs under `cuda_to_cpu()` (cuda mapped to cpu while it runs). The random-init
path all-reduces parameters that require grad in place (`trainer.py:582,593`), which autograd only
allows under `no_grad`. Current Nanotron also times every step with CUDA timers
(`nanotron_timer(..., "cuda")`), which on a CPU fall back to CPU timers once and then refuse the
next "cuda" request for the same name: on the CPU every timer is asked for as a CPU timer. What a
model family's training code needs is declared in its folder (`CpuNeeds.trainer_replaced`, e.g.
main's Llama random init) and applied here. Main's `train_step_logs` (trainer.py:781) calls
`loss_avg.item()` on every rank, but `training_step` only has a loss on the output pipeline stage
(None elsewhere, trainer.py:695-697): every run at PP > 1 fails at its first log. With PP > 1 the
other stages get the output stage's loss (one scalar broadcast in the pipeline group, at the
trainer's logging interval; training itself is untouched). A resumed run's optimizer state, loaded
on the CPU, is not moved to "cuda" (trainer.py:706). Import this module only after
`import_nanotron()`.
"""

import functools

import torch
import torch.distributed as dist
from nanotron import sanity_checks, trainer
from nanotron.optim.gradient_accumulator import FP32GradientAccumulator

from lighteval_nanotron.cpu.devices import on_cpu
from lighteval_nanotron.cpu.model_patches import replace
from lighteval_nanotron.models.families import available_families
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron


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
    for family in available_families():
        for owner, name, value in family.cpu_needs().trainer_replaced:
            replace(owner, name, value)
    if installed_nanotron().name == "main":
        from nanotron.logging.timers import Timers

        replace(trainer_class, "train_step_logs", _with_output_stage_loss(trainer_class.train_step_logs))
        replace(trainer, "state_dict_to_device", _optimizer_state_stays_on_cpu)  # trainer.py:706 (resume)
        if not torch.cuda.is_available():
            replace(Timers, "__call__", _cpu_timers(Timers.__call__))


def _optimizer_state_stays_on_cpu(state_dict, device) -> None:
    """main's `state_dict_to_device` (serialize/optimizer.py:132), which moves a resumed run's optimizer
    state to the GPU (and asserts it got there): on the CPU it already is where the model is."""


def _cpu_timers(call):
    """`Timers.__call__` asking for a CPU timer whatever type the caller names."""

    @functools.wraps(call)
    def wrapper(self, name=None, timer_type="cpu", *args, **kwargs):
        return call(self, name, "cpu", *args, **kwargs)

    return wrapper


def _with_output_stage_loss(train_step_logs):
    """main's `train_step_logs`, called on every pipeline stage with the output stage's loss."""

    @functools.wraps(train_step_logs)
    def wrapper(self, outputs, loss_avg, **kwargs):
        pp_pg = self.parallel_context.pp_pg
        if pp_pg.size() > 1:
            loss_avg = _output_stage_loss(loss_avg, pp_pg, self.unwrapped_model.output_pp_rank)
        return train_step_logs(self, outputs=outputs, loss_avg=loss_avg, **kwargs)

    return wrapper


def _output_stage_loss(loss_avg, pp_pg, output_pp_rank: int) -> torch.Tensor:
    """The loss of the output stage (its own tensor there, a float32 copy elsewhere): every stage calls this."""
    device = torch.device("cpu") if dist.get_backend(pp_pg) == "gloo" else torch.device("cuda")
    on_output_stage = dist.get_rank(pp_pg) == output_pp_rank
    if on_output_stage:
        value = loss_avg.detach().to(device=device, dtype=torch.float32).reshape(())
    else:
        value = torch.empty((), dtype=torch.float32, device=device)
    dist.broadcast(value, src=dist.get_global_rank(pp_pg, output_pp_rank), group=pp_pg)
    return loss_avg if on_output_stage else value
