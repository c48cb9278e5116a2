"""The CPU synthetic training loader: the same tokens whatever the model takes beside them
(`input_mask`, or Qwen2's `position_ids`), on the pipeline stage that reads each key."""

from lighteval_nanotron.nanotron_compat.variant import has_qwen2
from lighteval_nanotron.training.data.synthetic import takes_position_ids
from tests.helpers.distributed import parallel_context, run_distributed


def _first_batches(position_ids: bool) -> dict:
    import torch

    from lighteval_nanotron.training.data.synthetic import synthetic_dataloader

    context = parallel_context(1, 2, 1)
    loader = synthetic_dataloader(context, input_pp_rank=0, output_pp_rank=1, micro_batch_size=2, sequence_length=8,
                                  vocab_size=1024, seed=3, position_ids=position_ids)  # fmt: skip
    batch = next(loader)
    return {
        key: (value.tolist(), value.is_contiguous()) if torch.is_tensor(value) else type(value).__name__
        for key, value in batch.items()
    }


def test_position_ids_replace_the_input_mask_on_the_input_stage_only():
    with_mask = run_distributed(_first_batches, 2, False, timeout=60)
    with_positions = run_distributed(_first_batches, 2, True, timeout=60)
    first, last = with_positions
    assert sorted(first) == sorted(last) == ["input_ids", "label_ids", "label_mask", "position_ids"]
    assert first["position_ids"] == ([list(range(8))] * 2, True)
    assert first["input_ids"] == with_mask[0]["input_ids"] and first["input_ids"][1]  # contiguous
    assert last["position_ids"] == last["input_ids"] == "TensorPointer"
    assert last["label_ids"] == with_mask[1]["label_ids"]
    assert "input_mask" in with_mask[0] and "position_ids" not in with_mask[0]


def _takes_position_ids() -> dict:
    from lighteval_nanotron.models.families import FAMILIES

    return {
        family.name: takes_position_ids(family.training_class())
        for family in FAMILIES
        if family.unavailable_reason() is None
    }


def test_which_training_models_take_position_ids():
    (taken,) = run_distributed(_takes_position_ids, 1, timeout=60)  # with CPU support on (Nanotron's imports)
    assert taken["llama"] is False and taken.get("starcoder2") is not True
    assert taken.get("qwen2") is (True if has_qwen2() else None)
