"""The installed Nanotron is told apart by its features, in one place; a variant the project does
not support is refused by the CLI with one `error:` line naming it."""

import os
import subprocess
import sys
from pathlib import Path

from lighteval_nanotron.nanotron_variant import SUPPORTED_VARIANTS, installed_nanotron

REPO = Path(__file__).resolve().parents[2]


def test_the_test_environment_has_a_supported_nanotron():
    variant = installed_nanotron()
    assert variant.name in SUPPORTED_VARIANTS and (variant.location / "models" / "llama.py").is_file()


def _package_with_main_features(root: Path) -> Path:
    """A `nanotron` package tree with the files by which GitHub main differs from 0.4."""
    package = root / "nanotron"
    for folder in ("models", "nn", "config"):
        (package / folder).mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.4"\n')
    (package / "models" / "qwen.py").write_text("")
    (package / "config" / "models_config.py").write_text("class LlamaConfig:\n    rope_interleaved: bool = False\n")
    return root


def test_current_nanotron_main_is_refused_with_one_error_line(tmp_path):
    site = _package_with_main_features(tmp_path)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "lighteval_nanotron", "eval", str(tmp_path / "ckpt"), "--cpu", "--tasks",
               "lighteval|arc:easy|0"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode != 0 and len(errors) == 1, done.stderr[-3000:]
    assert "is GitHub main, not 0.4" in errors[0] and "a Qwen2 model (models/qwen.py)" in errors[0]
    assert "LlamaConfig.rope_interleaved" in errors[0] and "Traceback" not in done.stderr
