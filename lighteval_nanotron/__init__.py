"""lighteval-nanotron: evaluate LLMs on downstream benchmarks during Nanotron training.

`import lighteval_nanotron` stays light: the evaluation entry points are imported on first use.
"""

from typing import Any

from lighteval_nanotron.version import __version__

_LAZY_EXPORTS = {
    "evaluate": "lighteval_nanotron.evaluate_once",
    "EvaluationPipeline": "lighteval_nanotron.pipeline",
    "EvaluationResult": "lighteval_nanotron.pipeline",
    "PipelineSettings": "lighteval_nanotron.pipeline",
    "NanotronLightevalModel": "lighteval_nanotron.models.engine",
    "EngineConfig": "lighteval_nanotron.models.engine",
    "enable_cpu_support": "lighteval_nanotron.cpu",
}

__all__ = ["__version__", *_LAZY_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _LAZY_EXPORTS:
        import importlib

        return getattr(importlib.import_module(_LAZY_EXPORTS[name]), name)
    raise AttributeError(f"module 'lighteval_nanotron' has no attribute {name!r}")
