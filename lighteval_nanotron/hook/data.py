"""The training data loader of `run_train`: a synthetic token stream or a Hugging Face text dataset.

Nanotron 0.4's wheel ships no `run_train.py`; this is the part of it that builds the loader, as
Nanotron's example does (tokenize and cut into rows, as its `clm_process`, then
`get_train_dataloader`), plus a CPU synthetic stream. Current Nanotron (GitHub main) takes one
loader per data stage (`config.data_stages`); here only synthetic stages are built for it (its own
`run_train.py` builds dataset stages), each a `StageLoader` so that its checkpoints can be resumed.
"""

from typing import Any, Iterator, Union

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.hook.stage_loader import StageLoader
from lighteval_nanotron.hook.trainer_state import consumed_train_samples
from lighteval_nanotron.nanotron_variant import installed_nanotron


def build_dataloader(trainer: Any, cpu: bool) -> Union[Iterator[Any], dict]:
    """The loader for `trainer.config.data`: synthetic when `data.dataset` is null, else the HF
    dataset; with GitHub main, {stage name: synthetic loader} for its `data_stages`."""
    if installed_nanotron().name == "main":
        return _synthetic_stages(trainer, cpu)
    data = trainer.config.data
    if data is None or data.dataset is None:
        return _synthetic(trainer, cpu, data.seed if data is not None else trainer.config.general.seed)
    return _hf_dataset(trainer)


def _synthetic_stages(trainer: Any, cpu: bool) -> dict:
    stages = trainer.config.data_stages or []
    with_datasets = [stage.name for stage in stages if stage.data.dataset is not None]
    if with_datasets or not stages:
        raise ConfigError(
            f"With current Nanotron (GitHub main) lighteval_nanotron's run_train builds synthetic data stages only; "
            f"the stages {', '.join(with_datasets) or '(none)'} have datasets. Train with Nanotron's own run_train.py "
            "and the EvaluatingTrainer (docs/hook.md)."
        )
    loader = _synthetic(trainer, cpu, stages[0].data.seed)
    return {stage.name: StageLoader(loader, stage.name, trainer.metadata) for stage in stages}


def _synthetic(trainer: Any, cpu: bool, seed: int) -> Iterator[Any]:
    config, model = trainer.config, trainer.unwrapped_model
    if cpu:
        from lighteval_nanotron.parallel.cpu.data import synthetic_dataloader_for

        return synthetic_dataloader_for(trainer, seed=seed)
    if installed_nanotron().name == "main":
        from nanotron.data.dataloader import dummy_infinite_data_generator

        from lighteval_nanotron.parallel.cpu.data import takes_position_ids

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
    from nanotron.utils import main_rank_first
    from transformers import AutoTokenizer

    config, model = trainer.config, trainer.unwrapped_model
    args = config.data.dataset
    with main_rank_first(trainer.parallel_context.world_pg):
        raw = get_datasets(hf_dataset_or_datasets=args.hf_dataset_or_datasets, splits=args.hf_dataset_splits)["train"]
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer.tokenizer_name_or_path)
        dataset = token_chunks(raw, tokenizer, args.text_column_name, trainer.sequence_length)
    loader = get_train_dataloader(
        train_dataset=dataset,
        sequence_length=trainer.sequence_length,
        parallel_context=trainer.parallel_context,
        input_pp_rank=model.input_pp_rank,
        output_pp_rank=model.output_pp_rank,
        micro_batch_size=trainer.micro_batch_size,
        consumed_train_samples=consumed_train_samples(trainer),
        dataloader_num_workers=config.data.num_loading_workers,
        seed_worker=config.data.seed,
        dataloader_drop_last=True,
    )
    return iter(loader)


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
