"""lighteval-nanotron: evaluate LLMs on downstream benchmarks during Nanotron training."""

__version__ = "0.1.0"
