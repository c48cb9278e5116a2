"""The evaluation pipeline: tasks -> docs -> requests -> model -> metrics -> `EvaluationResult`.

`EvaluationPipeline.prepare(model, tasks, PipelineSettings(...))` once, then `pipeline.run(step=...)` at
every evaluation (`lighteval_nanotron.evaluate(...)` does both once and writes the results). See
docs/pipeline.md.
"""

from lighteval_nanotron.pipeline.pipeline import EvaluationPipeline, load_tasks
from lighteval_nanotron.pipeline.result import EvaluationResult, SampleDetail
from lighteval_nanotron.pipeline.settings import PipelineSettings

__all__ = ["EvaluationPipeline", "EvaluationResult", "PipelineSettings", "SampleDetail", "load_tasks"]
