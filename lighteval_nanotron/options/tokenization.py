"""How a doc's context and choices become tokens: options the engine takes as they are.

`EngineConfig` (the engine's settings) and `EvaluationOptions` (the hook's section, `eval`) both
include this dataclass, so each of these options is declared here only and reaches the engine
without being copied by name.
"""

from dataclasses import dataclass, field
from typing import Optional

from lighteval_nanotron.options.base import Options, scores


@dataclass(kw_only=True)
class TokenizationOptions(Options):
    """How docs become tokens."""

    pairwise_tokenization: bool = field(default=False, metadata=scores())
    """Tokenize context and continuation separately (lighteval's option of that name). Default:
    `context + continuation` tokenized together and split at the context's token count."""

    multichoice_continuations_start_space: Optional[bool] = field(default=None, metadata=scores())
    """Multiple choice (lighteval's option of that name): true puts a space before each choice
    that lacks one, false strips each choice's leading whitespace, unset scores choices as the task
    writes them."""
