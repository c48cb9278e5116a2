"""Run Nanotron (0.4, or current GitHub main) on CPU with gloo, explicitly and only when asked.

Nothing here is active on import. Call once per process, before building a model:

    from lighteval_nanotron.cpu import enable_cpu_support
    enable_cpu_support()

`enable_cpu_support()` (idempotent) makes Nanotron importable (`import_nanotron`), installs the
pure-PyTorch flash-attn (`install_flash_attn_fallback(force=True)`) and grouped_gemm
(`install_grouped_gemm_fallback(force=True)`, which current Nanotron imports), places the models, their
pipeline P2P and the decoding helpers on the CPU with gloo-safe sends (`model_patches`), and makes
`DistributedTrainer` train on the CPU (`trainer_patches`; `trainer=False` leaves that part out, and
`nanotron.trainer` unimported, for evaluation-only processes: a later call with `trainer=True`
adds it). On a GPU machine without flash-attn,
`install_flash_attn_fallback(allow_on_gpu=True)` installs only the (SDPA-based) attention part;
`ensure_cuda_extensions()` is what GPU runs call before importing Nanotron's models (the real
packages, or the stand-ins where the policy of `stand_ins` allows them). See docs/cpu.md.
"""

import os

from lighteval_nanotron.nanotron_compat.flash_attn_fallback import (
    ensure_flash_attn,
    install_flash_attn_fallback,
    is_fallback_installed,
)
from lighteval_nanotron.nanotron_compat.grouped_gemm_fallback import ensure_grouped_gemm, install_grouped_gemm_fallback
from lighteval_nanotron.nanotron_compat.imports import ensure_cuda_extensions, import_nanotron
from lighteval_nanotron.parallel.device import enable_cpu_mode, is_cpu_support_enabled

_TRAINER_PATCHED = False


def enable_cpu_support(trainer: bool = True) -> None:
    """Patch Nanotron so that models, pipelines, decoding and (with `trainer`, the default) the
    trainer run on CPU/gloo. Importing `nanotron.trainer` costs seconds (datasets, transformers):
    an evaluation-only process passes `trainer=False`."""
    global _TRAINER_PATCHED
    if not is_cpu_support_enabled():
        install_flash_attn_fallback(force=True)
        install_grouped_gemm_fallback(force=True)
        # current Nanotron's TP linears assert this CUDA stream setting; it means nothing on the CPU
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
        import_nanotron()
        from lighteval_nanotron.cpu import model_patches

        model_patches.apply_model_patches()
        enable_cpu_mode()
    if trainer and not _TRAINER_PATCHED:
        from lighteval_nanotron.cpu import trainer_patches

        trainer_patches.apply_trainer_patches()
        _TRAINER_PATCHED = True


__all__ = [
    "enable_cpu_support",
    "ensure_cuda_extensions",
    "ensure_flash_attn",
    "ensure_grouped_gemm",
    "import_nanotron",
    "install_flash_attn_fallback",
    "install_grouped_gemm_fallback",
    "is_cpu_support_enabled",
    "is_fallback_installed",
]
