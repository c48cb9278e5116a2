"""Small builders of docs and responses for the metric tests."""

from __future__ import annotations

from lighteval_nanotron.requests import Doc, ModelResponse


def mc_doc(choices: list[str], gold: int | list[int], query: str = "Q:") -> Doc:
    return Doc(query=query, choices=choices, gold_index=gold, id="0", task_name="test|mc")


def logprob_response(
    logprobs: list[float],
    tokens: list[list[int]] | None = None,
    unconditioned: list[float] | None = None,
    greedy: list[bool] | None = None,
) -> ModelResponse:
    return ModelResponse(
        logprobs=logprobs,
        output_tokens=tokens if tokens is not None else [[1] for _ in logprobs],
        unconditioned_logprobs=unconditioned,
        argmax_logits_eq_gold=greedy if greedy is not None else [False for _ in logprobs],
    )


def gen_doc(golds: list[str]) -> Doc:
    return Doc(query="Q:", choices=golds, gold_index=list(range(len(golds))), id="0", task_name="test|gen")


def gen_response(*texts: str) -> ModelResponse:
    return ModelResponse(text=list(texts))


def text_doc(text: str, original_query: str | None = None) -> Doc:
    return Doc(query=text, choices=[], gold_index=[], original_query=original_query, id="0", task_name="test|ppl")


def ppl_response(total_logprob: float, n_tokens: int) -> ModelResponse:
    return ModelResponse(logprobs=[total_logprob], output_tokens=[list(range(n_tokens))])
