"""`SamplingMethod`: what the model is asked to do with a doc (the request kind)."""

from __future__ import annotations

from enum import Enum


class SamplingMethod(str, Enum):
    """What the model is asked to do with a doc; each metric declares the one it needs."""

    GENERATIVE = "GENERATIVE"
    LOGPROBS = "LOGPROBS"
    PERPLEXITY = "PERPLEXITY"
