"""lighteval's import path of the request and response types (`from lighteval_nanotron.tasks.requests import Doc`);
they live in `lighteval_nanotron.requests`.
"""

from lighteval_nanotron.requests import Doc, GenerationParameters, ModelResponse, SamplingMethod

__all__ = ["Doc", "GenerationParameters", "ModelResponse", "SamplingMethod"]
