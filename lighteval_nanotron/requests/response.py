"""`ModelResponse`: a model's answer to one doc."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelResponse:
    """A model's answer to one doc (lighteval's `ModelResponse`).

    - LOGPROBS: `logprobs[i]` is the summed log-probability of choice `i` given the context,
      `argmax_logits_eq_gold[i]` whether greedy decoding reproduces choice `i` token by token,
      `output_tokens[i]` the continuation tokens of choice `i`, and `unconditioned_logprobs[i]`
      the same choice scored after the doc's `unconditioned_query` (PMI), when asked for.
    - PERPLEXITY: `logprobs == [total]`, the rolling log-likelihood of the whole text, and
      `output_tokens == [tokens]`.
    - GENERATIVE: `text[k]` the k-th generation (stop sequences removed), `output_tokens[k]` its
      tokens.
    """

    input: str | None = None
    input_tokens: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    output_tokens: list[list[int]] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    argmax_logits_eq_gold: list[bool] = field(default_factory=list)
    unconditioned_logprobs: list[float] | None = None
    truncated_tokens_count: int = 0
    padded_tokens_count: int = 0
    non_finite_logits: bool = False
    """Generation met NaN/inf logits for this doc (its text is then meaningless)."""
    unknown_tokens: list[int] = field(default_factory=list)
    """Generated ids the tokenizer does not have (rows of the model's vocabulary past the tokenizer's):
    decoding would drop them silently, so the doc's text is not what the model generated."""
