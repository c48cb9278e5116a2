"""Nanotron's Starcoder2 (multi-query and grouped-query): the engine adapter (`family`), the Hugging
Face conversion (`conversion`), what it needs on CPU (`cpu_needs`) and its tiny test models (`tiny`)."""

from lighteval_nanotron.models.families.starcoder2.family import Starcoder2Family

__all__ = ["Starcoder2Family"]
