"""The engine over a Nanotron model, its settings taken from the options: the training hook builds
it over the trainer's live model (`training_engine`), `eval` over the model it loads; both through
`build_engine`, with the tokenizer of `setup.tokenizer`."""

from __future__ import annotations

import dataclasses
from typing import Any

from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
from lighteval_nanotron.options import BatchingOptions, EvaluationOptions, TokenizationOptions
from lighteval_nanotron.setup.tokenizer import training_tokenizer
from lighteval_nanotron.tasks import PromptManager


def engine_config(options: EvaluationOptions) -> EngineConfig:
    """The engine settings the options give: the `TokenizationOptions` and `BatchingOptions` both
    include, the generation settings, and no special tokens of the tokenizer's own under a chat
    template (the template renders them). Results go to the reporting rank."""
    groups = (TokenizationOptions, BatchingOptions)
    shared = {field.name: getattr(options, field.name) for group in groups for field in dataclasses.fields(group)}
    return EngineConfig(
        add_special_tokens=not options.use_chat_template,
        generation=options.generation or {},
        gather_to="reporting",
        **shared,
    )


def prompt_manager(options: EvaluationOptions, tokenizer: Any) -> PromptManager:
    """How prompts are rendered; raises `ConfigError` when a chat template is asked of a tokenizer
    without one."""
    return PromptManager(options.use_chat_template, tokenizer, options.system_prompt)


def build_engine(
    model: Any, parallel_context: Any, tokenizer: Any, options: EvaluationOptions, prompts: PromptManager | None = None
) -> NanotronLightevalModel:
    """The evaluation engine over `model` on its mesh (every rank; no collective)."""
    prompts = prompts if prompts is not None else prompt_manager(options, tokenizer)
    return NanotronLightevalModel(
        model, parallel_context, tokenizer, engine_config(options), prompt_fn=prompts.prepare_prompt
    )


def training_engine(
    training_config: Any, model: Any, parallel_context: Any, options: EvaluationOptions
) -> NanotronLightevalModel:
    """The hook's engine: the training config's tokenizer over the trainer's own model and mesh.
    A chat template asked of a tokenizer without one fails here, before step 1."""
    tokenizer = training_tokenizer(training_config, options.use_chat_template)
    return build_engine(model, parallel_context, tokenizer, options)
