"""The Nanotron evaluation engine: prepare plans once, run them on the live sharded model."""

from lighteval_nanotron.models.nanotron.config import EngineConfig
from lighteval_nanotron.models.nanotron.generation_plan import GenerationPlan
from lighteval_nanotron.models.nanotron.model import NanotronLightevalModel
from lighteval_nanotron.models.nanotron.scoring_plan import ScoringPlan

__all__ = ["EngineConfig", "GenerationPlan", "NanotronLightevalModel", "ScoringPlan"]
