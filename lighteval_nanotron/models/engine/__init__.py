"""The Nanotron evaluation engine: prepare plans once, run them on the live sharded model."""

from lighteval_nanotron.models.engine.config import EngineConfig
from lighteval_nanotron.models.engine.generation_plan import GenerationPlan
from lighteval_nanotron.models.engine.model import NanotronLightevalModel
from lighteval_nanotron.models.engine.scoring_plan import ScoringPlan

__all__ = ["EngineConfig", "GenerationPlan", "NanotronLightevalModel", "ScoringPlan"]
