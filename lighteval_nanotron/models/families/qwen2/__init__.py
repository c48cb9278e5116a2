"""Current Nanotron's Qwen2, dense and mixture of experts (GitHub main; 0.4 has none): the engine
adapter (`family`), the Hugging Face conversion (`conversion`), what it needs on CPU (`cpu_needs`) and
its tiny test models (`tiny`)."""

from lighteval_nanotron.models.families.qwen2.family import Qwen2Family

__all__ = ["Qwen2Family"]
