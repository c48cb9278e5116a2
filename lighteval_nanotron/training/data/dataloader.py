"""The training data loader of `run_train`: a synthetic token stream or a Hugging Face text dataset.

Nanotron 0.4's wheel ships no `run_train.py`; this is the part of it that builds the loader, as
Nanotron's example does (tokenize and cut into rows, as its `clm_process`, then
`get_train_dataloader`), plus a CPU synthetic stream. Current Nanotron (GitHub main) takes one
loader per data stage (`config.data_stages`), each a `StageLoader` so that its checkpoints can be
resumed; a stage's HF dataset goes through main's own `get_datasets` and `get_train_dataloader`,
tokenized by `token_chunks` as under 0.4, so that the same documents give the same rows (main's
sampler reads them in order, 0.4's shuffles them).
"""

from typing import Any, Iterator, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.trainer_state import consumed_train_samples
from lighteval_nanotron.nanotron_compat.variant import installed_nanotron
from lighteval_nanotron.training.data.stage_loader import StageLoader
from lighteval_nanotron.training.data.synthetic import synthetic_dataloader_for, takes_position_ids


def build_dataloader(trainer: Any, cpu: bool) -> Union[Iterator[Any], dict]:
    """The loader for `trainer.config.data`: synthetic when `data.dataset` is null, else the HF
    dataset; with GitHub main, {stage name: loader} for its `data_stages`."""
    if installed_nanotron().name == "main":
        stages = trainer.config.data_stages or []
        if not stages:
            raise ConfigError("The config has no data_stages: current Nanotron (GitHub main) needs at least one.")
        if all(stage.data.dataset is None for stage in stages):
            return _synthetic_stages(trainer, cpu)
        return {stage.name: _main_stage(trainer, cpu, stage) for stage in stages}
    data = trainer.config.data
    if data is None or data.dataset is None:
        return _synthetic(trainer, cpu, data.seed if data is not None else trainer.config.general.seed)
    return _hf_dataset(trainer)


def _synthetic_stages(trainer: Any, cpu: bool) -> dict:
    stages = trainer.config.data_stages
    loader = _synthetic(trainer, cpu, stages[0].data.seed)
    return {stage.name: StageLoader(loader, stage.name, trainer.metadata) for stage in stages}


def _main_stage(trainer: Any, cpu: bool, stage: Any) -> StageLoader:
    """One data stage's loader under GitHub main: synthetic, or its HF dataset from the samples
    this stage consumed before (as recorded in the checkpoint's metadata)."""
    if stage.data.dataset is None:
        return StageLoader(_synthetic(trainer, cpu, stage.data.seed), stage.name, trainer.metadata)
    from nanotron.config.config import PretrainDatasetsArgs
    from nanotron.data.dataloader import get_train_dataloader
    from nanotron.data.processing import get_datasets

    model, args = trainer.unwrapped_model, stage.data.dataset
    if not isinstance(args, PretrainDatasetsArgs):
        raise ConfigError(
            f"Data stage {stage.name}: lighteval_nanotron's run_train builds HF text datasets "
            f"(hf_dataset_or_datasets, text_column_name), not {type(args).__name__}; train with Nanotron's own "
            "run_train.py and the EvaluatingTrainer (docs/hook.md)."
        )
    recorded = next((done for done in trainer.metadata.data_stages or [] if done.name == stage.name), None)
    tokenizer = _tokenizer(trainer)
    dataset = _token_rows(trainer, get_datasets, args, tokenizer, hf_dataset_config_name=args.hf_dataset_config_name)
    consumed = int(recorded.consumed_train_samples) if recorded is not None else 0
    needed = stage_steps_left(trainer.config, stage, trainer.iteration_step) * trainer.global_batch_size
    if consumed + needed > len(dataset):
        raise ConfigError(
            f"Data stage {stage.name}: {args.hf_dataset_or_datasets} gives {len(dataset)} rows of "
            f"{trainer.sequence_length + 1} tokens, {consumed} already consumed, but its remaining steps need "
            f"{needed}. Lower tokens.train_steps (or the batch size), or add text."
        )
    position_ids = takes_position_ids(model)
    loader = get_train_dataloader(
        **_loader_args(trainer, dataset, consumed, stage.data),
        dataloader_pin_memory=not cpu,
        use_position_ids=position_ids,
        sequence_sep_tokens=_separators(tokenizer) if position_ids else None,
    )
    return StageLoader(iter(loader), stage.name, trainer.metadata, source=str(args.hf_dataset_or_datasets))


def stage_steps_left(config: Any, stage: Any, last_step: int) -> int:
    """Training steps of `stage` after step `last_step`: it runs from its `start_training_step` to
    the next stage's (or to `tokens.train_steps`)."""
    starts = sorted(other.start_training_step for other in config.data_stages)
    end = next((start for start in starts if start > stage.start_training_step), config.tokens.train_steps + 1)
    return max(0, end - max(stage.start_training_step, last_step + 1))


def _tokenizer(trainer: Any) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(trainer.config.tokenizer.tokenizer_name_or_path)


def _separators(tokenizer: Any) -> list:
    """The token ids that start a new document in a packed row (main's collator cuts position ids there)."""
    ids = (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id)
    return [token for token in ids if token is not None]


def _synthetic(trainer: Any, cpu: bool, seed: int) -> Iterator[Any]:
    config, model = trainer.config, trainer.unwrapped_model
    if cpu:
        return synthetic_dataloader_for(trainer, seed=seed)
    if installed_nanotron().name == "main":
        from nanotron.data.dataloader import dummy_infinite_data_generator

        from lighteval_nanotron.training.data.synthetic import takes_position_ids

        # main's generator takes the context-parallel group, and packed position ids for Qwen2 (as its run_train.py)
        extra = {"use_position_ids": takes_position_ids(model), "cp_pg": trainer.parallel_context.cp_pg}
    else:
        from nanotron.dataloader import dummy_infinite_data_generator

        extra = {}
    return dummy_infinite_data_generator(
        micro_batch_size=trainer.micro_batch_size,
        sequence_length=trainer.sequence_length,
        input_pp_rank=model.input_pp_rank,
        output_pp_rank=model.output_pp_rank,
        vocab_size=config.model.model_config.vocab_size,
        seed=seed,
        parallel_context=trainer.parallel_context,
        **extra,
    )()


def _hf_dataset(trainer: Any) -> Iterator[Any]:
    from nanotron.dataloader import get_datasets, get_train_dataloader

    data = trainer.config.data
    dataset = _token_rows(trainer, get_datasets, data.dataset, _tokenizer(trainer))
    return iter(get_train_dataloader(**_loader_args(trainer, dataset, consumed_train_samples(trainer), data)))


def _token_rows(trainer: Any, get_datasets: Any, args: Any, tokenizer: Any, **dataset_options: Any) -> Any:
    """The dataset's train split as `token_chunks` rows, built on the main rank first (the others read its cache);
    `get_datasets` is the installed Nanotron's."""
    from nanotron.utils import main_rank_first

    with main_rank_first(trainer.parallel_context.world_pg):
        raw = get_datasets(
            hf_dataset_or_datasets=args.hf_dataset_or_datasets, splits=args.hf_dataset_splits, **dataset_options
        )["train"]
        return token_chunks(raw, tokenizer, args.text_column_name, trainer.sequence_length)


def _loader_args(trainer: Any, dataset: Any, consumed: int, data: Any) -> dict:
    """`get_train_dataloader`'s arguments that both Nanotrons take: the rows, the mesh, the batch, the resume point
    and `data`'s (0.4's `config.data`, or a stage's) workers and seed."""
    model = trainer.unwrapped_model
    return {
        "train_dataset": dataset,
        "sequence_length": trainer.sequence_length,
        "parallel_context": trainer.parallel_context,
        "input_pp_rank": model.input_pp_rank,
        "output_pp_rank": model.output_pp_rank,
        "micro_batch_size": trainer.micro_batch_size,
        "consumed_train_samples": consumed,
        "dataloader_num_workers": data.num_loading_workers,
        "seed_worker": data.seed,
        "dataloader_drop_last": True,
    }


def token_chunks(raw: Any, tokenizer: Any, text_column: str, sequence_length: int) -> Any:
    """The texts, each followed by the end-of-text token, concatenated and cut into rows of
    `sequence_length + 1` tokens (consecutive rows share one token: input and shifted labels).

    Nanotron 0.4's `clm_process` does this with `tokenizer.batch_encode_plus`, which transformers
    5 no longer has."""
    import numpy as np
    from datasets import Dataset, Features, Sequence, Value

    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    ids = np.fromiter(
        (token for text in raw[text_column] for token in tokenizer(text)["input_ids"] + eos), dtype=np.int64
    )
    rows = (len(ids) - 1) // sequence_length
    chunks = [ids[i * sequence_length : i * sequence_length + sequence_length + 1] for i in range(rows)]
    features = Features({"input_ids": Sequence(feature=Value(dtype="int64"), length=sequence_length + 1)})
    return Dataset.from_dict({"input_ids": [chunk.tolist() for chunk in chunks]}, features=features)
