"""Imported once by the fork server of `run_distributed`, so that every rank starts with torch and
Nanotron already imported. It only imports; each rank still calls `enable_cpu_support()`."""

from lighteval_nanotron.cpu import import_nanotron, install_flash_attn_fallback, install_grouped_gemm_fallback

install_flash_attn_fallback(force=True)
install_grouped_gemm_fallback(force=True)
import_nanotron()

import nanotron.models.llama  # noqa: E402,F401
import nanotron.serialize  # noqa: E402,F401
import nanotron.trainer  # noqa: E402,F401
import transformers  # noqa: E402,F401
