"""The unit of evaluation: a `Doc` (one benchmark sample), the ways a model is asked about it, and its answer.

Tasks, metrics, models and the pipeline import these types; this package imports none of them.
`lighteval_nanotron.tasks.requests` re-exports them (lighteval's import path).
"""

from lighteval_nanotron.requests.doc import Doc
from lighteval_nanotron.requests.generation_parameters import GenerationParameters
from lighteval_nanotron.requests.response import ModelResponse
from lighteval_nanotron.requests.sampling_method import SamplingMethod

__all__ = ["Doc", "GenerationParameters", "ModelResponse", "SamplingMethod"]
