"""Run Nanotron 0.4 on CPU with gloo, explicitly and only when asked.

Nothing here is active on import. Call once per process, before building a model:

    from lighteval_nanotron.parallel.cpu import enable_cpu_support
    enable_cpu_support()

`enable_cpu_support()` (idempotent) makes Nanotron importable (`import_nanotron`), installs the
pure-PyTorch flash-attn (`install_flash_attn_fallback(force=True)`), places the Llama model, its
pipeline P2P and the decoding helpers on the CPU with gloo-safe sends (`model_patches`), and makes
`DistributedTrainer` train on the CPU (`trainer_patches`; `trainer=False` leaves that part out, and
`nanotron.trainer` unimported, for evaluation-only processes: a later call with `trainer=True`
adds it). On a GPU machine without flash-attn,
`install_flash_attn_fallback(allow_on_gpu=True)` installs only the (SDPA-based) attention part.
See docs/cpu.md.
"""

from lighteval_nanotron.parallel.cpu.flash_attn_fallback import (
    ensure_flash_attn,
    install_flash_attn_fallback,
    is_fallback_installed,
)
from lighteval_nanotron.parallel.cpu.imports import import_nanotron

_ENABLED = False
_TRAINER_PATCHED = False


def enable_cpu_support(trainer: bool = True) -> None:
    """Patch Nanotron 0.4 so that models, pipelines, decoding and (with `trainer`, the default)
    the trainer run on CPU/gloo. Importing `nanotron.trainer` costs seconds (datasets,
    transformers): an evaluation-only process passes `trainer=False`."""
    global _ENABLED, _TRAINER_PATCHED
    if not _ENABLED:
        install_flash_attn_fallback(force=True)
        import_nanotron()
        from lighteval_nanotron.parallel.cpu import model_patches

        model_patches.apply_model_patches()
        _ENABLED = True
    if trainer and not _TRAINER_PATCHED:
        from lighteval_nanotron.parallel.cpu import trainer_patches

        trainer_patches.apply_trainer_patches()
        _TRAINER_PATCHED = True


def is_cpu_support_enabled() -> bool:
    """True once `enable_cpu_support()` has run in this process."""
    return _ENABLED


__all__ = [
    "enable_cpu_support",
    "ensure_flash_attn",
    "import_nanotron",
    "install_flash_attn_fallback",
    "is_cpu_support_enabled",
    "is_fallback_installed",
]
