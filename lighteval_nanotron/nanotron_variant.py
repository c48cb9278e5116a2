"""Which Nanotron is installed, told by its features (files of the package), not its version
string: the PyPI 0.4 wheel and GitHub main (2026) both call themselves 0.4.

    variant = installed_nanotron()       # NanotronVariant(name="0.4" | "main", features=..., location=...)
    require_supported_nanotron()         # UnsupportedModelError naming the variant and what is supported

Nothing here imports Nanotron, so the check can run before Nanotron's own imports (main's import
flash-attn names that the CPU stand-in does not provide).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from lighteval_nanotron.errors import UnsupportedModelError

SUPPORTED_VARIANTS = ("0.4",)
"""Variants the engine, builder and converter are verified with (docs/engine.md, "Nanotron versions")."""

_MAIN_FEATURES = {
    "models/qwen.py": "a Qwen2 model (models/qwen.py)",
    "nn/attention.py": "pluggable attention implementations (nn/attention.py)",
}
_MAIN_CONFIG_KEYS = ("rope_interleaved", "_attn_implementation", "z_loss_enabled")
QWEN2_FEATURE = _MAIN_FEATURES["models/qwen.py"]
"""The feature by which an installed Nanotron can build Qwen2 (GitHub main has it, 0.4 does not)."""


@dataclass(frozen=True)
class NanotronVariant:
    name: str
    """"0.4" (the PyPI wheel / v0.4 tag) or "main" (GitHub main after 0.4)."""
    features: tuple[str, ...]
    """The features that told it apart (empty for 0.4)."""
    location: Path


def installed_nanotron() -> NanotronVariant:
    """The installed Nanotron's variant; UnsupportedModelError when none is installed."""
    spec = importlib.util.find_spec("nanotron")
    if spec is None or not spec.submodule_search_locations:
        raise UnsupportedModelError("Nanotron is not installed: `pip install nanotron==0.4` (see README).")
    root = Path(next(iter(spec.submodule_search_locations)))
    features = [description for path, description in _MAIN_FEATURES.items() if (root / path).is_file()]
    models_config = root / "config" / "models_config.py"
    text = models_config.read_text(encoding="utf-8") if models_config.is_file() else ""
    features += [f"LlamaConfig.{key}" for key in _MAIN_CONFIG_KEYS if f"{key}:" in text]
    return NanotronVariant("main" if features else "0.4", tuple(features), root)


def has_qwen2() -> bool:
    """True when the installed Nanotron has Qwen2 (`Qwen2Config`, `Qwen2ForTraining`)."""
    return QWEN2_FEATURE in installed_nanotron().features


def require_supported_nanotron() -> NanotronVariant:
    """The installed variant, or UnsupportedModelError naming it, its features and what is supported."""
    variant = installed_nanotron()
    if variant.name not in SUPPORTED_VARIANTS:
        raise UnsupportedModelError(
            f"The installed Nanotron ({variant.location}) is GitHub main, not 0.4: it has "
            f"{', '.join(variant.features)}. "
            f"lighteval_nanotron supports Nanotron {', '.join(SUPPORTED_VARIANTS)} (pip install nanotron==0.4); "
            "see docs/engine.md, 'Nanotron versions', for what was tried with main."
        )
    return variant
