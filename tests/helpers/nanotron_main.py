"""Tests that need current Nanotron (GitHub main: Qwen2) skip under Nanotron 0.4 with one reason."""

import pytest

from lighteval_nanotron.nanotron_compat.variant import has_qwen2

requires_qwen2 = pytest.mark.skipif(
    not has_qwen2(),
    reason="Qwen2 needs current Nanotron (GitHub main), not the installed 0.4: run "
    "`make test NANOTRON_SRC=/path/to/nanotron` (docs/engine.md, 'Nanotron versions')",
)
