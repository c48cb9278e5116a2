"""Build the evaluation's runtime objects from a live trainer: tokenizer, engine, pipeline, loggers."""

from pathlib import Path
from typing import Any

import torch.distributed as dist

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.config import EvaluationConfig


def load_tokenizer(trainer_config: Any) -> Any:
    """The training config's tokenizer (`tokenizer.tokenizer_name_or_path`), through `transformers`."""
    from transformers import AutoTokenizer

    args = trainer_config.tokenizer
    if args is None or not args.tokenizer_name_or_path:
        raise ConfigError(
            "lighteval_nanotron needs a tokenizer: set tokenizer.tokenizer_name_or_path in the training config "
            "(a Hub name or a folder with tokenizer files)."
        )
    try:
        return AutoTokenizer.from_pretrained(args.tokenizer_name_or_path, revision=args.tokenizer_revision)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"Cannot load tokenizer {args.tokenizer_name_or_path!r} ({error}): point "
            "tokenizer.tokenizer_name_or_path at a folder with tokenizer files, or a Hub name in the cache."
        ) from error


def build_engine(trainer: Any, config: EvaluationConfig) -> tuple[Any, dict[str, Any]]:
    """The engine over the trainer's own model and mesh, and the tasks (every rank; no collective).
    A chat template asked of a tokenizer without one fails here, before step 1."""
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.pipeline import load_tasks
    from lighteval_nanotron.tasks import PromptManager
    from lighteval_nanotron.tasks.data_dirs import set_data_dirs

    if config.data_dirs is not None:
        set_data_dirs(config.data_dirs)
    tokenizer = load_tokenizer(trainer.config)
    prompts = PromptManager(config.use_chat_template, tokenizer, config.system_prompt)
    engine_config = EngineConfig.for_run(config)
    engine = NanotronLightevalModel(
        trainer.model, trainer.parallel_context, tokenizer, engine_config, prompt_fn=prompts.prepare_prompt
    )
    return engine, load_tasks(config.tasks, config.custom_tasks, config.fewshot_draws)


def build_pipeline(engine: Any, tasks: dict[str, Any], config: EvaluationConfig, model_name: str) -> Any:
    """Prepare the tasks once (collective: one rank loads the datasets and tokenizes, all receive)."""
    from lighteval_nanotron.pipeline import EvaluationPipeline

    return EvaluationPipeline.prepare(
        engine,
        tasks,
        config.max_samples,
        model_name=model_name,
        show_progress=config.progress_bar and dist.get_rank() == 0,
    )


def is_reporting_rank(pipeline: Any) -> bool:
    """The one rank that receives results and writes them."""
    return bool(pipeline.model.is_reporting_rank)


def build_loggers(config: EvaluationConfig, trainer: Any) -> Any:
    """The results loggers (JSON, details, TensorBoard, W&B); `log` is the hook's own table."""
    from lighteval_nanotron.tracking import TrackingConfig

    tracking = TrackingConfig(
        output_dir=config.output_dir,
        loggers=[name for name in config.loggers if name != "log"],
        tensorboard_dir=str(Path(config.output_dir) / "tensorboard"),
        tensorboard_prefix=config.tensorboard_prefix,
        wandb_project=config.wandb_project or trainer.config.general.project,
        wandb_entity=config.wandb_entity,
        wandb_mode=config.wandb_mode,
        wandb_dir=config.wandb_dir,
    )
    return tracking.build(wandb_run=_active_wandb_run())


def _active_wandb_run() -> Any:
    """The W&B run `hook.wandb_run` opened on this rank (Nanotron's logging rank), if any."""
    try:
        import wandb
    except ImportError:
        return None
    return wandb.run
