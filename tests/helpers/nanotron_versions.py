"""Which Nanotron the tests run against (0.4 in CI; GitHub main with `make test NANOTRON_SRC=...`),
and the marks for the few tests that only apply to one of them, each with its reason."""

import pytest

from lighteval_nanotron.nanotron_compat.variant import installed_nanotron

ON_MAIN = installed_nanotron().name == "main"

STARCODER2_CONFIG_ON_MAIN = (
    "Nanotron main's Config.__post_init__ reads model_config.num_key_value_heads "
    "(nanotron/config/config.py:540), which its Starcoder2Config does not have (it has num_kv_heads): "
    "main cannot build a training config for a Starcoder2"
)

only_on_main = pytest.mark.skipif(
    not ON_MAIN, reason="checks current Nanotron (GitHub main): run with `make test NANOTRON_SRC=/path/to/nanotron`"
)


def skip_on_main(reason: str) -> pytest.MarkDecorator:
    """Skip a test that only applies to Nanotron 0.4 when running against main, saying why."""
    return pytest.mark.skipif(ON_MAIN, reason=reason)

