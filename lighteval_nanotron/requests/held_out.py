"""Held-out loss: the request (a domain's token windows) and the model's answer (their losses).

A held-out set is a stream of tokens cut into windows of `sequence_length + 1` tokens, as the
training data loaders cut theirs: a window's first `sequence_length` tokens are the input, its last
`sequence_length` the targets (the input shifted by one). The model answers with the summed
negative log-likelihood of each window's targets; `metrics.held_out` turns that into loss,
perplexity and bits per byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HELD_OUT_PREFIX = "heldout|"
"""Results keys of held-out domains are `heldout|<name>` (a task's full name has three `|`-separated
parts, `suite|task|k`, so the two can never collide); the averages over domains are
`heldout|_micro` and `heldout|_macro` (a domain name cannot start with `_`)."""

WINDOWS_DIGEST = "windows_sha256"
"""The `config_tasks` key of a domain's window digest (`HeldOutSet.digest`; the averages over domains:
`domains_digest` of theirs): evaluations whose digests differ scored other windows (other data,
budget, seed or sequence length, other domains), and the signal analysis never draws one curve
through them."""

HELD_OUT_METHOD = "HELDOUT"
"""The `sampling_method` of a held-out window's details row."""


def held_out_key(name: str) -> str:
    """The results key of the held-out domain `name`."""
    return HELD_OUT_PREFIX + name


def is_held_out_key(key: str) -> bool:
    return key.startswith(HELD_OUT_PREFIX)


def domains_digest(digests: dict[str, str]) -> str:
    """The window digest of an average over domains: of its domains' keys and digests."""
    text = "\n".join(f"{key} {digests[key]}" for key in sorted(digests))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class HeldOutSet:
    """One held-out domain, tokenized once at setup: the windows every evaluation scores."""

    name: str
    windows: np.ndarray
    """`[sequences, sequence_length + 1]` int32 token ids."""
    target_bytes: np.ndarray
    """`[sequences]` int64: UTF-8 bytes of the text each window's targets stand for
    (`heldout.windows` says how they are counted for each kind of source)."""
    description: dict[str, Any] = field(default_factory=dict)
    """Where the windows come from (source, kind, documents, tokens available, selection,
    notes): recorded in the results file's `config_tasks` entry of the domain."""

    @property
    def key(self) -> str:
        return held_out_key(self.name)

    @property
    def sequence_length(self) -> int:
        return int(self.windows.shape[1]) - 1

    @property
    def target_tokens(self) -> int:
        return int(self.windows.shape[0]) * self.sequence_length

    def digest(self) -> str:
        """The first 16 hex digits of the SHA-256 of the windows' shape and token ids."""
        windows = np.ascontiguousarray(self.windows, dtype="<i4")
        return hashlib.sha256(repr(windows.shape).encode() + windows.tobytes()).hexdigest()[:16]


def window_digests(sets: list[HeldOutSet]) -> dict[str, str]:
    """`{results key: windows digest}` of `sets`: the one `heldout.build` recorded (`WINDOWS_DIGEST`),
    hashed only for a set built without it, so that asking again does not hash every window again."""
    return {held_out.key: held_out.description.get(WINDOWS_DIGEST) or held_out.digest() for held_out in sets}


@dataclass
class HeldOutLosses:
    """The model's answer for one `HeldOutSet`: per window, the summed negative log-likelihood
    (nats, float64) of its `sequence_length` targets, in window order."""

    nll: np.ndarray
    targets_per_window: int
