"""The engine settings come from the options (`setup.engine.engine_config`), typed, never copied
by attribute name from an untyped run object."""

import dataclasses

from lighteval_nanotron.models.engine import EngineConfig
from lighteval_nanotron.options import EvaluationOptions, TokenizationOptions
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.requests import GenerationParameters
from lighteval_nanotron.setup.engine import engine_config


def test_default_options_give_the_default_engine():
    assert engine_config(EvaluationOptions(tasks="a|b|0")) == EngineConfig()


def test_options_reach_the_engine():
    options = EvaluationConfig(
        tasks="a|b|0",
        tokens_per_batch=512,
        pairwise_tokenization=True,
        multichoice_continuations_start_space=False,
        use_chat_template=True,
        generation={"temperature": 0.5, "seed": 3},
    )
    config = engine_config(options)
    assert (config.tokens_per_batch, config.add_special_tokens) == (512, False)  # the template renders them
    assert (config.pairwise_tokenization, config.multichoice_continuations_start_space) == (True, False)
    assert config.generation == GenerationParameters(temperature=0.5, seed=3)
    assert config.gather_to == "reporting"


def test_the_engine_and_the_options_share_one_declaration_of_how_docs_become_tokens():
    shared = {field.name for field in dataclasses.fields(TokenizationOptions)}
    assert shared <= {field.name for field in dataclasses.fields(EngineConfig)}
    assert shared <= {field.name for field in dataclasses.fields(EvaluationOptions)}
    assert "for_run" not in vars(EngineConfig)
