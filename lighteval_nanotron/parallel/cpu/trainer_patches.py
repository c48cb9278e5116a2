"""Patches that let Nanotron's `DistributedTrainer` (0.4, or GitHub main) train on CPU with gloo
(see docs/cpu.md).

The trainer creates `device="cuda"` tensors in a handful of places; each of those calls is
wrapped so that it runs under `cuda_to_cpu()` (cuda mapped to cpu while it runs). The random-init
path all-reduces parameters that require grad in place (`trainer.py:582,593`), which autograd only
allows under `no_grad`. Current Nanotron also times every step with CUDA timers
(`nanotron_timer(..., "cuda")`), which on a CPU fall back to CPU timers once and then refuse the
next "cuda" request for the same name: on the CPU every timer is asked for as a CPU timer. And
main's `LlamaForTraining.init_model_randomly` (llama.py:1095, commit 2411b02) hands `config.model`
to a parametrizator that reads `config.model.init_method` and `config.parallelism` (the whole
config, as Qwen2's passes it): every random-init Llama run fails with an AttributeError. On CPU it
gets a view holding both (`_ModelArgsWithConfig`); on a GPU, start main's Llama runs from a
checkpoint (docs/engine.md, "Nanotron versions"). Import this module only after `import_nanotron()`.
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
    if installed_nanotron().name == "main":
        from nanotron.logging.timers import Timers
        from nanotron.models.llama import LlamaForTraining

        replace(LlamaForTraining, "init_model_randomly", _with_whole_config(LlamaForTraining.init_model_randomly))
        if not torch.cuda.is_available():
            replace(Timers, "__call__", _cpu_timers(Timers.__call__))


class _ModelArgsWithConfig:
    """`config.model` that also answers `.model` and `.parallelism` like the whole config."""

    def __init__(self, config):
        self.model, self.parallelism = config.model, config.parallelism

    def __getattr__(self, name):
        return getattr(self.model, name)


class _ConfigWithModelView:
    """The whole config, with `.model` a `_ModelArgsWithConfig`."""

    def __init__(self, config):
        self._config, self.model = config, _ModelArgsWithConfig(config)

    def __getattr__(self, name):
        return getattr(self._config, name)


def _with_whole_config(init_model_randomly):
    """main's `LlamaForTraining.init_model_randomly` called so that what it hands on is the whole config."""

    @functools.wraps(init_model_randomly)
    def wrapper(self, config):
        return init_model_randomly(self, config=_ConfigWithModelView(config))

    return wrapper


def _cpu_timers(call):
    """`Timers.__call__` asking for a CPU timer whatever type the caller names."""

    @functools.wraps(call)
    def wrapper(self, name=None, timer_type="cpu", *args, **kwargs):
        return call(self, name, "cpu", *args, **kwargs)

    return wrapper
