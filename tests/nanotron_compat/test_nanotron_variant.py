"""The installed Nanotron is told apart by its features, in one place: 0.4 and GitHub main are
supported; anything else (a tree with some of main's features but not all) is refused by the CLI
with one `error:` line naming what it has and lacks."""

import os
import subprocess
import sys
from pathlib import Path

from lighteval_nanotron.nanotron_compat.variant import (
    SUPPORTED_VARIANTS,
    installed_nanotron,
    starcoder2_trainable,
    variant_at,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_test_environment_has_a_supported_nanotron():
    variant = installed_nanotron()
    assert variant.name in SUPPORTED_VARIANTS and (variant.location / "models" / "llama.py").is_file()


def _package(root: Path, files: dict) -> Path:
    """A `nanotron` package tree under `root` with `files` (path -> text)."""
    package = root / "nanotron"
    for path, text in {"__init__.py": '__version__ = "0.4"\n', **files}.items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(text)
    return package


COMMON = {"models/llama.py": "", "trainer.py": ""}
MAIN_CONFIG = "class LlamaConfig:\n    rope_interleaved: bool = False\n    _attn_implementation: str = 'sdpa'\n" \
              "    z_loss_enabled: bool = False\n"  # fmt: skip
MAIN_FILES = {"models/qwen.py": "", "nn/attention.py": "", "nn/moe.py": "", "logging/__init__.py": ""}


def test_each_layout_is_told_apart(tmp_path):
    v04 = _package(tmp_path / "a", {**COMMON, "config/models_config.py": "class LlamaConfig: ...\n",
                                    "dataloader.py": "", "logging.py": ""})  # fmt: skip
    main = _package(tmp_path / "b", {**COMMON, **MAIN_FILES, "config/models_config.py": MAIN_CONFIG})
    partial = _package(tmp_path / "c", {**COMMON, "models/qwen.py": "", "config/models_config.py": MAIN_CONFIG})
    assert variant_at(v04).name == "0.4" and variant_at(v04).features == ()
    assert variant_at(main).name == "main" and "a Qwen2 model (models/qwen.py)" in variant_at(main).features
    assert variant_at(partial).name == "unknown"
    assert "mixture-of-experts layers (nn/moe.py)" in variant_at(partial).missing


def test_an_unknown_nanotron_is_refused_with_one_error_line(tmp_path):
    _package(tmp_path, {**COMMON, "models/qwen.py": "", "config/models_config.py": MAIN_CONFIG})
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "lighteval_nanotron", "eval", str(tmp_path / "ckpt"), "--cpu", "--tasks",
               "lighteval|arc:easy|0"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1, done.stderr[-3000:]
    assert "neither the 0.4 release nor GitHub main" in errors[0] and "a Qwen2 model (models/qwen.py)" in errors[0]
    assert "lacks" in errors[0] and "nn/moe.py" in errors[0] and "Traceback" not in done.stderr


def test_a_training_config_that_cannot_hold_a_starcoder2_is_told_by_its_source(tmp_path):
    """Main's Config reads `model_config.num_key_value_heads`, which its Starcoder2Config lacks."""
    reads = "        assert self.model.model_config.num_key_value_heads >= self.parallelism.tp\n"
    starcoder2 = "@dataclass\nclass Starcoder2Config:\n    num_kv_heads: int = 1\n"
    fixed = "@dataclass\nclass Starcoder2Config:\n    num_key_value_heads: int = 1\n"
    after = "@dataclass\nclass Qwen2Config:\n    num_key_value_heads: int = 1\n"
    cases = {
        "0.4": ("class Config: ...\n", starcoder2, True),
        "main": (reads, starcoder2 + after, False),
        "fixed": (reads, fixed + after, True),
    }
    for name, (config, models_config, trainable) in cases.items():
        package = _package(tmp_path / name, {"config/config.py": config, "config/models_config.py": models_config})
        assert starcoder2_trainable(package) is trainable, name
    assert starcoder2_trainable() is (installed_nanotron().name == "0.4")  # verified at main's 2411b02
