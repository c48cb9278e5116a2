"""The evaluation pipeline: tasks -> docs -> requests -> model -> metrics -> `EvaluationResult`.

`EvaluationPipeline.prepare(model, tasks, max_samples)` once, then `pipeline.run(step=...)` at
every evaluation (`lighteval_nanotron.evaluate(...)` does both once and writes the results). See
docs/pipeline.md.
"""

from lighteval_nanotron.pipeline.pipeline import EvaluationPipeline, load_tasks
from lighteval_nanotron.pipeline.result import EvaluationResult, SampleDetail

__all__ = ["EvaluationPipeline", "EvaluationResult", "SampleDetail", "load_tasks"]
