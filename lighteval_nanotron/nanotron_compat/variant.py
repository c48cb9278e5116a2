"""Which Nanotron is installed, told by its features (files of the package and keys of its Llama
config), not its version string: the PyPI 0.4 wheel and GitHub main (2026) both call themselves 0.4.

    variant = installed_nanotron()       # NanotronVariant(name="0.4" | "main" | "unknown", ...)
    require_supported_nanotron()         # UnsupportedModelError naming the variant and what is supported
    shipped_config("tiny_cpu_train.yaml")  # configs/... or configs/nanotron_main/..., in the installed schema

- "0.4": the PyPI wheel / v0.4 tag: none of main's features, and 0.4's own layout (`dataloader.py`,
  `logging.py` modules);
- "main": every feature of GitHub main (verified at the commit in docs/engine.md, "Nanotron versions");
- "unknown": anything else (some of main's features but not all, or neither layout): refused,
  naming what was found and what was missing.

Nothing here imports Nanotron, so the check runs before Nanotron's own imports (main's need the
flash-attn and grouped_gemm stand-ins on CPU).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from lighteval_nanotron.errors import UnsupportedModelError

SUPPORTED_VARIANTS = ("0.4", "main")
"""Variants the engine, builder and converter are verified with (docs/engine.md, "Nanotron versions")."""

_REQUIRED_FILES = ("models/llama.py", "config/models_config.py", "trainer.py")
_V04_FEATURES = {
    "dataloader.py": "a dataloader module (dataloader.py)",
    "logging.py": "a logging module (logging.py)",
}
_MAIN_FEATURES = {
    "models/qwen.py": "a Qwen2 model (models/qwen.py)",
    "nn/attention.py": "pluggable attention implementations (nn/attention.py)",
    "nn/moe.py": "mixture-of-experts layers (nn/moe.py)",
    "logging/__init__.py": "a logging package (logging/)",
}
_MAIN_CONFIG_KEYS = ("rope_interleaved", "_attn_implementation", "z_loss_enabled")
CONFIG_FOLDERS = {"0.4": Path("configs"), "main": Path("configs") / "nanotron_main"}
"""Where the repository's shipped training configs of each variant are: main's config schema differs
(`optimizer.optimizer_factory`, `data_stages` instead of `data`), so each config ships in both."""
QWEN2_FEATURE = _MAIN_FEATURES["models/qwen.py"]
"""The feature by which an installed Nanotron can build Qwen2 (GitHub main has it, 0.4 does not)."""


@dataclass(frozen=True)
class NanotronVariant:
    name: str
    """"0.4" (the PyPI wheel / v0.4 tag), "main" (GitHub main after 0.4) or "unknown"."""
    features: tuple[str, ...]
    """Main's features found (empty for 0.4)."""
    location: Path
    missing: tuple[str, ...] = ()
    """What an "unknown" variant lacks of the layout it comes closest to."""


def _main_features(root: Path) -> tuple[list[str], list[str]]:
    """(main's features present, main's features absent) in the package at `root`."""
    found, absent = [], []
    for path, description in _MAIN_FEATURES.items():
        (found if (root / path).is_file() else absent).append(description)
    models_config = root / "config" / "models_config.py"
    text = models_config.read_text(encoding="utf-8") if models_config.is_file() else ""
    for key in _MAIN_CONFIG_KEYS:
        (found if f"{key}:" in text else absent).append(f"LlamaConfig.{key}")
    return found, absent


def variant_at(root: Path) -> NanotronVariant:
    """The variant of the `nanotron` package directory `root`."""
    missing = [path for path in _REQUIRED_FILES if not (root / path).is_file()]
    found, absent = _main_features(root)
    if missing:
        return NanotronVariant("unknown", tuple(found), root, tuple(missing))
    if found and not absent:
        return NanotronVariant("main", tuple(found), root)
    if not found:
        lacking = [description for path, description in _V04_FEATURES.items() if not (root / path).is_file()]
        return NanotronVariant("0.4" if not lacking else "unknown", (), root, tuple(lacking))
    return NanotronVariant("unknown", tuple(found), root, tuple(absent))


def installed_nanotron() -> NanotronVariant:
    """The installed Nanotron's variant; UnsupportedModelError when none is installed."""
    spec = importlib.util.find_spec("nanotron")
    if spec is None or not spec.submodule_search_locations:
        raise UnsupportedModelError("Nanotron is not installed: `pip install nanotron==0.4` (see README).")
    return variant_at(Path(next(iter(spec.submodule_search_locations))))


def has_qwen2() -> bool:
    """True when the installed Nanotron has Qwen2 (`Qwen2Config`, `Qwen2ForTraining`)."""
    return QWEN2_FEATURE in installed_nanotron().features


def _class_body(source: str, name: str) -> str:
    """The text of `class name` in `source`, up to the next top-level statement ("" when absent)."""
    start = source.find(f"\nclass {name}")
    if start < 0:
        return ""
    following = [source.find(marker, start + 1) for marker in ("\nclass ", "\n@", "\ndef ")]
    ends = [end for end in following if end > 0]
    return source[start : min(ends) if ends else len(source)]


def starcoder2_trainable(root: Path | None = None) -> bool:
    """False when the installed Nanotron's training `Config` cannot hold a Starcoder2: GitHub main's
    `Config.__post_init__` reads `model_config.num_key_value_heads` (config/config.py:540 at 2411b02)
    for every model, and its `Starcoder2Config` has no such field (it has `num_kv_heads`), so an
    `AttributeError` stops every Starcoder2 training run while the config is read. `root`: a `nanotron`
    package directory (default: the installed one)."""
    root = root if root is not None else installed_nanotron().location
    config_source = (root / "config" / "config.py").read_text(encoding="utf-8")
    if "model_config.num_key_value_heads" not in config_source:
        return True
    models_source = (root / "config" / "models_config.py").read_text(encoding="utf-8")
    return "num_key_value_heads" in _class_body(models_source, "Starcoder2Config")


def require_supported_nanotron() -> NanotronVariant:
    """The installed variant, or UnsupportedModelError naming it, what it has and lacks, and what is supported."""
    variant = installed_nanotron()
    if variant.name not in SUPPORTED_VARIANTS:
        has = f"it has {', '.join(variant.features)}" if variant.features else "it has none of GitHub main's features"
        raise UnsupportedModelError(
            f"The installed Nanotron ({variant.location}) is neither the 0.4 release nor GitHub main: "
            f"{has} but lacks {', '.join(variant.missing)}. lighteval_nanotron supports Nanotron "
            f"{' and GitHub '.join(SUPPORTED_VARIANTS)} (pip install nanotron==0.4, or main from source "
            "as in docs/engine.md, 'Nanotron versions')."
        )
    return variant


def shipped_config(name: str) -> Path:
    """The repository's shipped training config `name` (e.g. "tiny_cpu_train.yaml") written for the
    installed Nanotron: `configs/` for 0.4, `configs/nanotron_main/` for GitHub main."""
    variant = require_supported_nanotron()
    return Path(__file__).resolve().parents[2] / CONFIG_FOLDERS[variant.name] / name
