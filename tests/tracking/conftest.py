import pytest
from helpers_tracking import make_result

from lighteval_nanotron.pipeline.result import EvaluationResult


@pytest.fixture
def result() -> EvaluationResult:
    return make_result()
