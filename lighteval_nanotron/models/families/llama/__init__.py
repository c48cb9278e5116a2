"""Nanotron's Llama (0.4 and current Nanotron): the engine adapter (`family`), the Hugging
Face conversion (`conversion`), what it needs on CPU (`cpu_needs`) and its tiny test models (`tiny`)."""

from lighteval_nanotron.models.families.llama.family import LlamaFamily

__all__ = ["LlamaFamily"]
