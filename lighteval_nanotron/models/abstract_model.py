"""The model interface the evaluation pipeline calls: three request kinds, one response per doc."""

from __future__ import annotations

from abc import ABC, abstractmethod

from lighteval_nanotron.requests import Doc, ModelResponse


class LightevalModel(ABC):
    """A model that answers docs. Each method returns one `ModelResponse` per doc, in doc order."""

    @abstractmethod
    def loglikelihood(self, docs: list[Doc]) -> list[ModelResponse]:
        """Log-probability of each of `doc.choices` after the doc's full prompt (LOGPROBS)."""

    @abstractmethod
    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        """Log-likelihood of the doc's whole prompt text, however long (PERPLEXITY)."""

    @abstractmethod
    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        """Greedy continuation of the doc's prompt until a stop condition (GENERATIVE)."""
