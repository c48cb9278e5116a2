"""Which Nanotron the tests run against (0.4 in CI; GitHub main with `make test NANOTRON_SRC=...`),
and the marks for the few tests that only apply to one of them, each with its reason."""

import pytest

from lighteval_nanotron.nanotron_variant import installed_nanotron

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


def in_installed_schema(content: dict) -> dict:
    """A training config written for Nanotron 0.4 (as configs/tiny_cpu_train.yaml) in the schema of
    the installed Nanotron: main names the optimizer in `optimizer.optimizer_factory` and takes its
    data as `data_stages` (one stage from step 1 here)."""
    if not ON_MAIN:
        return content
    content = dict(content)
    optimizer = dict(content["optimizer"])
    factory = {key: optimizer.pop(key) for key in ("adam_eps", "adam_beta1", "adam_beta2", "torch_adam_is_fused")}
    content["optimizer"] = {**optimizer, "optimizer_factory": {"name": "adamW", **factory}}
    content["data_stages"] = [{"name": "synthetic", "start_training_step": 1, "data": content.pop("data")}]
    return content
