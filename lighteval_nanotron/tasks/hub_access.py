"""Whether the Hugging Face Hub may be asked (the offline variables) and whether it answers: one
connection attempt of a few seconds, instead of the Hub client's retries (about a minute without
a network). Used before a dataset (`tasks.data_dirs`) or a tokenizer (`setup.tokenizer`) is looked
up on the Hub by name."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

HUB_PROBE_TIMEOUT_S = 3.0
DATASETS_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
"""Any of these set: datasets come from the Hugging Face cache only."""
MODELS_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Any of these set: tokenizers and models come from the Hugging Face cache only."""


def offline_mode(variables: tuple[str, ...]) -> str | None:
    """The first of `variables` set to a true value (the Hub must not be asked), else None."""
    for name in variables:
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return None


def hub_unreachable() -> str | None:
    """Why the Hub's endpoint cannot be reached (one connection attempt), else None."""
    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as error:
        return f"{constants.ENDPOINT} unreachable: {error}"
    return None
