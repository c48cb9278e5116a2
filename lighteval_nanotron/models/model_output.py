"""lighteval's import path for `ModelResponse` (`lighteval.models.model_output`).

The type itself lives in `tasks/requests.py`, below both `metrics/` and `models/`.
"""

from lighteval_nanotron.tasks.requests import ModelResponse

__all__ = ["ModelResponse"]
