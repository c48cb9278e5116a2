"""Held-out sets: named domains of the team's own text, read and tokenized once at setup.

A domain comes from a Nanoset folder (the tokenized `.ds` files Nanotron's data stages read), a
local jsonl/parquet file or folder with a text column, or a Hugging Face dataset by name. Each
becomes a `requests.HeldOutSet` (token windows and the bytes they stand for) that the pipeline
sends to the model like any other request. This package sits beside `tasks/`: it reads data and
builds requests, and never sees a model or a process group.
"""

from lighteval_nanotron.heldout.build import build_held_out_set, check_sequence_length
from lighteval_nanotron.heldout.spec import DEFAULT_HELD_OUT_TOKENS, HeldOutSpec, held_out_specs, parse_held_out_option

__all__ = [
    "DEFAULT_HELD_OUT_TOKENS",
    "HeldOutSpec",
    "build_held_out_set",
    "check_sequence_length",
    "held_out_specs",
    "parse_held_out_option",
]
