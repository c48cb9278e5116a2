"""When the flash-attn stand-in is installed: on CPU machines (or when asked for), never over a real
flash-attn, said once in the log; its attention is PyTorch's scaled_dot_product_attention.

Each case runs in a fresh interpreter: installing the stand-in changes `sys.modules`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from lighteval_nanotron.nanotron_compat import flash_attn_fallback as fa

REPO = Path(__file__).resolve().parents[2]
ANNOUNCEMENT = "flash-attn stand-in in use"


def _python(code: str, tmp_path: Path, extra_path: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    paths = [str(p) for p in (extra_path, REPO) if p is not None]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1", **env}
    environ.pop(fa.ALLOW_ON_GPU_ENV, None)
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _fake_real_flash_attn(root: Path) -> Path:
    """An importable `flash_attn` package standing for a real installation."""
    package = root / "site" / "flash_attn"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("REAL = True\n")
    return root / "site"


def test_a_real_flash_attn_is_left_alone(tmp_path):
    site = _fake_real_flash_attn(tmp_path)
    done = _python(
        """
        from lighteval_nanotron.cpu import ensure_flash_attn, install_flash_attn_fallback
        from lighteval_nanotron.cpu import is_fallback_installed
        assert install_flash_attn_fallback() is False
        assert install_flash_attn_fallback(allow_on_gpu=True) is False
        assert ensure_flash_attn() == "flash-attn"
        import flash_attn
        assert flash_attn.REAL and not is_fallback_installed()
        print("real kept")
        """,
        tmp_path,
        site,
    )
    assert "real kept" in done.stdout and ANNOUNCEMENT not in done.stderr


def test_installed_on_a_cpu_machine_and_said_once_at_info_level(tmp_path):
    """Where no CUDA device exists the stand-in is the only way to run: a note for --verbose, not a warning."""
    quiet = _python(
        "from lighteval_nanotron.cpu import install_flash_attn_fallback\ninstall_flash_attn_fallback()\n", tmp_path
    )
    assert ANNOUNCEMENT not in quiet.stderr  # nothing at the default (WARNING) level
    done = _python(
        """
        import logging
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
        import torch
        assert not torch.cuda.is_available()
        from lighteval_nanotron.cpu import ensure_flash_attn, import_nanotron, install_flash_attn_fallback
        assert install_flash_attn_fallback() is True
        assert install_flash_attn_fallback() is True
        assert ensure_flash_attn() == "stand-in"
        import_nanotron()
        import nanotron.models.llama as llama
        from lighteval_nanotron.nanotron_compat import flash_attn_fallback
        assert llama.flash_attn_varlen_func is flash_attn_fallback.flash_attn_varlen_func
        """,
        tmp_path,
    )
    assert done.stderr.count(ANNOUNCEMENT) == 1
    assert f"INFO {ANNOUNCEMENT} (no CUDA device)" in done.stderr


_AS_IF_CUDA = """
import torch
torch.cuda.is_available = lambda: True  # the policy only asks whether CUDA is there
from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.cpu import ensure_flash_attn, install_flash_attn_fallback, is_fallback_installed
"""


def test_not_installed_on_a_cuda_machine_unless_asked_for(tmp_path):
    refused = _python(
        _AS_IF_CUDA
        + """
assert install_flash_attn_fallback() is False and not is_fallback_installed()
try:
    ensure_flash_attn()
except ConfigError as error:
    print("refused:", error)
else:
    raise AssertionError("no error")
""",
        tmp_path,
    )
    assert "refused: flash-attn is not installed" in refused.stdout and fa.ALLOW_ON_GPU_ENV in refused.stdout
    assert ANNOUNCEMENT not in refused.stderr
    asked = _python(_AS_IF_CUDA + 'assert ensure_flash_attn() == "stand-in"\n', tmp_path, **{fa.ALLOW_ON_GPU_ENV: "1"})
    assert asked.stderr.count(ANNOUNCEMENT) == 1  # a warning on a CUDA machine: the real one would be faster
    other_rank = _python(
        _AS_IF_CUDA + 'assert ensure_flash_attn() == "stand-in"\n',
        tmp_path,
        LOCAL_RANK="1",
        **{fa.ALLOW_ON_GPU_ENV: "1"},
    )
    assert ANNOUNCEMENT not in other_rank.stderr  # said by local rank 0 of each node


def test_attention_runs_on_scaled_dot_product_attention(monkeypatch):
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("is_causal", False))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(fa.F, "scaled_dot_product_attention", counting)
    q, k, v = torch.randn(9, 4, 8), torch.randn(9, 2, 8), torch.randn(9, 2, 8)
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    fa.flash_attn_varlen_func(q, k, v, cu, cu, 5, 5, causal=True)
    assert calls == [True, True]  # one fused causal call per sequence, no explicit L x L mask
    cache = torch.zeros(1, 6, 2, 8)
    fa.flash_attn_with_kvcache(
        q[None, :2], cache, cache.clone(), k[None, :2], v[None, :2], cache_seqlens=3, causal=True
    )
    assert len(calls) == 3


_BUILD_MODELS_AS_IF_CUDA = (
    _AS_IF_CUDA
    + """
import sys
from lighteval_nanotron.models.families.llama.family import LlamaFamily
from lighteval_nanotron.nanotron_compat.imports import import_nanotron_trainer
try:
    trained = LlamaFamily.training_class()  # what build_nanotron_model builds
    import_nanotron_trainer(with_wandb=False, with_data_libraries=False)  # what `eval` imports
except ConfigError as error:
    print("refused:", error)
else:
    print("built:", trained.__name__, is_fallback_installed())
"""
)


def test_a_gpu_process_without_cpu_support_can_import_the_models(tmp_path):
    """The engine on CUDA (the device check's GPU worker, `eval`, the benchmark) never calls
    `enable_cpu_support()`: Nanotron 0.4's models import flash-attn at module level, so building a
    model there needs the stand-in made importable first (it was, before, only by the hook's trainer
    module: everything else failed with `No module named 'flash_attn'`); without it asked for, a
    ConfigError that names the switch."""
    asked = _python(_BUILD_MODELS_AS_IF_CUDA, tmp_path, **{fa.ALLOW_ON_GPU_ENV: "1"})
    assert "built: LlamaForTraining True" in asked.stdout, asked.stdout + asked.stderr[-2000:]
    refused = _python(_BUILD_MODELS_AS_IF_CUDA, tmp_path)
    assert "refused: flash-attn is not installed" in refused.stdout and fa.ALLOW_ON_GPU_ENV in refused.stdout
    assert "No module named" not in refused.stdout + refused.stderr
