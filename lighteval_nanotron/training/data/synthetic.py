"""A synthetic training data loader for CPU runs that gives the same data in every layout.

Nanotron's `dummy_infinite_data_generator` needs a CUDA generator and seeds it by DP and PP rank,
so the data depends on the layout. Here sample `k` of the run (k = step * global_batch_size + i)
is drawn from its own generator seeded with (seed, k): the global batch of each step is the same
whatever the TP/PP/DP split. Each sample is an arithmetic progression of token ids modulo the
vocabulary (random start and stride), so the loss of a small model goes down visibly.

Models whose training forward takes `position_ids` instead of `input_mask` (current Nanotron's
Qwen2: positions restart at each sequence start, from which it builds its varlen boundaries) get
each row's positions 0..sequence_length-1, one sequence per row.
"""

import inspect
from typing import Any, Dict, Iterator, Union

import numpy as np
import torch
import torch.distributed as dist

MAX_STRIDE = 8


def synthetic_sample(seed: int, index: int, length: int, vocab_size: int) -> torch.Tensor:
    """Sample `index`: `length` token ids (start + stride * t) % vocab_size, from generator (seed, index)."""
    rng = np.random.default_rng([seed, index])
    start, stride = int(rng.integers(vocab_size)), int(rng.integers(1, MAX_STRIDE))
    return (start + stride * torch.arange(length, dtype=torch.long)) % vocab_size


def synthetic_dataloader(
    parallel_context,
    input_pp_rank: int,
    output_pp_rank: int,
    micro_batch_size: int,
    sequence_length: int,
    vocab_size: int,
    batch_accumulation_per_replica: int = 1,
    seed: int = 0,
    start_step: int = 0,
    position_ids: bool = False,
) -> Iterator[Dict[str, Union[torch.Tensor, object]]]:
    """Infinite micro-batches for `DistributedTrainer.train`, in the order the trainer consumes them.

    Micro-batch m of step s on DP rank d holds samples s * gbs + (d * accumulation + m) * mbs + [0, mbs)
    (gbs = mbs * accumulation * dp). The input stage gets input_ids and input_mask (`position_ids`:
    position_ids instead), the output stage label_ids/label_mask (the next tokens), the other ranks
    TensorPointers.
    """
    from nanotron.parallel.pipeline_parallel.tensor_pointer import TensorPointer

    dp_rank, dp_size = dist.get_rank(parallel_context.dp_pg), parallel_context.dp_pg.size()
    pp_rank = dist.get_rank(parallel_context.pp_pg)
    global_batch_size = micro_batch_size * batch_accumulation_per_replica * dp_size
    step = start_step
    while True:
        for micro in range(batch_accumulation_per_replica):
            first = step * global_batch_size + (dp_rank * batch_accumulation_per_replica + micro) * micro_batch_size
            tokens = torch.stack(
                [synthetic_sample(seed, first + i, sequence_length + 1, vocab_size) for i in range(micro_batch_size)]
            )
            mask = torch.ones(micro_batch_size, sequence_length, dtype=torch.bool)
            if position_ids:
                position_key, positions = "position_ids", torch.arange(sequence_length).repeat(micro_batch_size, 1)
            else:
                position_key, positions = "input_mask", mask
            inputs_here, labels_here = pp_rank == input_pp_rank, pp_rank == output_pp_rank
            yield {
                "input_ids": tokens[:, :-1].contiguous() if inputs_here else TensorPointer(group_rank=input_pp_rank),
                position_key: positions if inputs_here else TensorPointer(group_rank=input_pp_rank),
                "label_ids": tokens[:, 1:] if labels_here else TensorPointer(group_rank=output_pp_rank),
                "label_mask": mask.clone() if labels_here else TensorPointer(group_rank=output_pp_rank),
            }
        step += 1


def synthetic_dataloader_for(trainer, seed: int = 0) -> Iterator[Dict[str, Union[torch.Tensor, object]]]:
    """`synthetic_dataloader` with the sizes of a built `DistributedTrainer`, resuming at its step."""
    tokens = trainer.config.tokens
    return synthetic_dataloader(
        trainer.parallel_context,
        input_pp_rank=trainer.unwrapped_model.input_pp_rank,
        output_pp_rank=trainer.unwrapped_model.output_pp_rank,
        micro_batch_size=tokens.micro_batch_size,
        sequence_length=tokens.sequence_length,
        vocab_size=trainer.model_config.vocab_size,
        batch_accumulation_per_replica=tokens.batch_accumulation_per_replica,
        seed=seed,
        start_step=trainer.iteration_step,  # the step it resumes from (0.4 and main set it in __init__)
        position_ids=takes_position_ids(trainer.unwrapped_model),
    )


def takes_position_ids(model: Any) -> bool:
    """True when a training model's forward takes `position_ids` (current Nanotron's Qwen2) rather than `input_mask`."""
    return "position_ids" in inspect.signature(model.forward).parameters
