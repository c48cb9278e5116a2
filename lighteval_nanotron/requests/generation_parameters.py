"""`GenerationParameters`: how generative docs are decoded."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from lighteval_nanotron.errors import ConfigError


@dataclass(frozen=True)
class GenerationParameters:
    """How generative docs are decoded; every field None means "not set here" (see `over`).

    Effective defaults when set nowhere: `temperature` 0 (greedy), `top_k` off, `top_p` off,
    `num_samples` from the task, `seed` 0. Field names are lighteval's `GenerationParameters`'.
    """

    temperature: float | None = None
    """Sampling temperature (0: greedy)."""
    top_k: int | None = None
    """Sample from the k most likely tokens (0: off)."""
    top_p: float | None = None
    """Nucleus sampling: the smallest set of tokens with this probability mass, in (0, 1] (1: off)."""
    num_samples: int | None = None
    """Generations per doc (needs a temperature above 0)."""
    seed: int | None = None
    """Sampling seed."""

    def __post_init__(self) -> None:
        checks = (
            ("temperature", lambda v: isinstance(v, (int, float)) and 0 <= v < math.inf, "a number >= 0 (0: greedy)"),
            ("top_k", lambda v: isinstance(v, int) and v >= 0, "an integer >= 0 (0: off)"),
            ("top_p", lambda v: isinstance(v, (int, float)) and 0 < v <= 1, "a number in (0, 1] (1: off)"),
            ("num_samples", lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
            ("seed", lambda v: isinstance(v, int) and v >= 0, "an integer >= 0"),
        )
        for name, ok, expected in checks:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not ok(value)):
                raise ConfigError(f"generation parameter {name}={value!r}: use {expected}.")

    @classmethod
    def from_dict(cls, values: "Mapping[str, Any] | GenerationParameters | None") -> "GenerationParameters":
        """From a YAML mapping with (a subset of) the field names; unknown keys are refused."""
        if values is None:
            return cls()
        if isinstance(values, GenerationParameters):
            return values
        if not isinstance(values, Mapping):
            raise ConfigError(f"generation parameters must be a mapping of {cls.names()}, got {values!r}.")
        unknown = [key for key in values if key not in cls.names()]
        if unknown:
            raise ConfigError(
                f"unknown generation parameter(s) {unknown}: the known ones are {cls.names()} "
                "(other decoding settings have no equivalent in this engine)."
            )
        return cls(**dict(values))

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def over(self, base: "GenerationParameters") -> "GenerationParameters":
        """These settings where set, `base`'s elsewhere."""
        return replace(base, **{k: v for k, v in asdict(self).items() if v is not None})

    @property
    def samples(self) -> bool:
        """True when decoding draws samples (temperature > 0) instead of taking the argmax."""
        return bool(self.temperature)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}
