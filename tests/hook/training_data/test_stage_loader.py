"""`StageLoader` against current Nanotron's own `TrainingMetadata`: the per-stage token count it
reports keeps main's resume check true, and a resumed stage counts on from its checkpoint."""

from lighteval_nanotron.training.data.stage_loader import SOURCE, StageLoader
from tests.helpers.nanotron_versions import only_on_main

pytestmark = only_on_main

GLOBAL_BATCH, SEQUENCE = 4, 32


def _train(metadata, loader, steps):
    """What main's trainer does per step with a stage loader (trainer.py:562-589)."""
    batches = iter(loader)
    for step in range(metadata.last_train_step + 1, metadata.last_train_step + steps + 1):
        next(batches)
        loader.dataset.update_consumption_metrics((step - 1) * GLOBAL_BATCH, step * GLOBAL_BATCH, SEQUENCE)
        for folder, stats in loader.dataset.get_consumption_stats().items():
            metadata.current_stage.consumed_tokens_per_dataset_folder[folder] = stats["tokens"]
        metadata.consumed_train_samples += GLOBAL_BATCH
        metadata.consumed_tokens_total += GLOBAL_BATCH * SEQUENCE
        metadata.last_train_step = step
        metadata.current_stage.consumed_train_samples += GLOBAL_BATCH


def _reloaded(metadata):
    """The metadata as main reads it back from a checkpoint (its __post_init__ checks run)."""
    import dataclasses

    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.serialize.metadata import DataStageMetadata, TrainingMetadata

    fields = dataclasses.asdict(metadata)
    fields["data_stages"] = [DataStageMetadata(**stage) for stage in fields["data_stages"]]
    return TrainingMetadata(**fields)


def test_stage_tokens_pass_mains_resume_check_and_count_on_after_resume():
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.serialize.metadata import DataStageMetadata, TrainingMetadata

    stage = DataStageMetadata(
        name="synthetic", start_training_step=1, consumed_train_samples=0, sequence_length=SEQUENCE
    )
    metadata = TrainingMetadata(
        consumed_train_samples=0, consumed_tokens_total=0, last_train_step=0, last_stage_idx=0, data_stages=[stage]
    )
    batches = iter(range(1000))
    _train(metadata, StageLoader(batches, "synthetic", metadata), steps=2)
    resumed = _reloaded(metadata)  # a plain generator leaves the stage at 0 tokens: main's assert fails here
    assert resumed.current_stage.consumed_tokens_per_dataset_folder == {SOURCE: 2 * GLOBAL_BATCH * SEQUENCE}

    loader = StageLoader(batches, "synthetic", resumed)
    assert loader.dataset.get_consumption_stats() == {SOURCE: {"tokens": 2 * GLOBAL_BATCH * SEQUENCE}}
    _train(resumed, loader, steps=3)
    assert _reloaded(resumed).consumed_tokens_total == 5 * GLOBAL_BATCH * SEQUENCE
    assert resumed.current_stage.consumed_tokens_per_dataset_folder == {SOURCE: 5 * GLOBAL_BATCH * SEQUENCE}


def test_a_stage_the_checkpoint_has_not_reached_starts_at_zero():
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.serialize.metadata import DataStageMetadata, TrainingMetadata

    done = DataStageMetadata(name="warmup", start_training_step=1, consumed_train_samples=2, sequence_length=32)
    done.consumed_tokens_per_dataset_folder[SOURCE] = 64
    metadata = TrainingMetadata(consumed_train_samples=2, last_train_step=1, last_stage_idx=0, data_stages=[done])
    assert StageLoader(iter(()), "main", metadata).dataset.get_consumption_stats() == {SOURCE: {"tokens": 0}}
    assert StageLoader(iter(()), "warmup", metadata).dataset.get_consumption_stats() == {SOURCE: {"tokens": 64}}


def test_a_dataset_stage_records_and_resumes_under_its_dataset_name():
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()
    from nanotron.serialize.metadata import DataStageMetadata, TrainingMetadata

    source = "examples/data/real_text"
    stage = DataStageMetadata(
        name="counting", start_training_step=1, consumed_train_samples=0, sequence_length=SEQUENCE
    )
    metadata = TrainingMetadata(
        consumed_train_samples=0, consumed_tokens_total=0, last_train_step=0, last_stage_idx=0, data_stages=[stage]
    )
    batches = iter(range(1000))
    _train(metadata, StageLoader(batches, "counting", metadata, source=source), steps=2)
    resumed = _reloaded(metadata)
    assert resumed.current_stage.consumed_tokens_per_dataset_folder == {source: 2 * GLOBAL_BATCH * SEQUENCE}
    loader = StageLoader(batches, "counting", resumed, source=source)
    assert loader.dataset.get_consumption_stats() == {source: {"tokens": 2 * GLOBAL_BATCH * SEQUENCE}}
