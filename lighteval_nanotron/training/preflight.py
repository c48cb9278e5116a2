"""What `train` checks before any process group, model or dataset exists, so that a launch mistake
or a bad evaluation input ends in one `ConfigError` (one `error:` line) within seconds, not in a
traceback per rank after the model is built.

- `check_launch`: the processes the config's parallelism needs against how this was launched (no
  launcher for a multi-process layout: `KeyError: 'WORLD_SIZE'` otherwise; `--nproc` under
  torchrun), and the devices: a GPU run where no CUDA device is visible (`_cuda_setDevice` on every
  rank otherwise) or with more processes on a node than devices.
- `check_evaluation_inputs`: the section's tasks (a misspelt name, a missing custom tasks file)
  and the training tokenizer's source (a folder, the Hugging Face cache, or a reachable Hub); with
  `asynchronous:`, the held-out domains (built in the loop at setup, but by each launched evaluation
  otherwise).
"""

from __future__ import annotations

import os
from typing import Any

from lighteval_nanotron.errors import ConfigError


def processes_needed(parallelism: Any) -> int:
    """tp x pp x dp x expert_parallel_size of a Nanotron `ParallelismArgs`."""
    ep = getattr(parallelism, "expert_parallel_size", 1) or 1
    return int(parallelism.tp * parallelism.pp * parallelism.dp * ep)


def check_launch(path: str, config: Any, cpu: bool, nproc: int | None) -> None:
    """Raise ConfigError, with the command that works, when `train` was started in a way that cannot
    run this config here (every rank of a launched job raises the same)."""
    needed = processes_needed(config.parallelism)
    command = f"lighteval-nanotron train --config-file {path}"
    launched = "WORLD_SIZE" in os.environ
    if nproc is not None and launched:
        raise ConfigError(
            f"--nproc starts the processes itself, but this one was started by a launcher (WORLD_SIZE="
            f"{os.environ['WORLD_SIZE']}): drop --nproc under torchrun or srun."
        )
    if nproc is None and not launched and needed > 1:
        on_cpu = f"`{command} --cpu --nproc {needed}` on CPU"
        raise ConfigError(
            f"{path}: parallelism needs {needed} processes and no launcher started them: run {on_cpu}, or "
            f"`lighteval-nanotron torchrun --nproc-per-node {needed} train --config-file {path}` on GPUs."
        )
    if cpu:
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"No CUDA device is visible, and {path} trains on GPUs: add --cpu to train on CPU with gloo "
            f"(`{command} --cpu" + (f" --nproc {needed}`)." if needed > 1 else "`).")
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    devices = torch.cuda.device_count()
    if local > devices:
        raise ConfigError(
            f"{local} processes on this node but {devices} CUDA device(s) visible: start one process per GPU "
            f"(torchrun --nproc-per-node {devices}) and fit parallelism.tp x pp x dp to the GPUs there are."
        )


def check_evaluation_inputs(config: Any) -> None:
    """The `lighteval_nanotron:` section's tasks resolve and the training tokenizer can be had."""
    from lighteval_nanotron.options.hook import SECTION
    from lighteval_nanotron.setup.tasks import load_tasks
    from lighteval_nanotron.setup.tokenizer import check_tokenizer_source
    from lighteval_nanotron.tasks import data_dirs_kept

    section = getattr(config, SECTION, None)
    if section is None:
        return
    with data_dirs_kept():  # the launcher's own check: the ranks set their data dirs themselves
        load_tasks(section)
    tokenizer = config.tokenizer
    if tokenizer is not None and tokenizer.tokenizer_name_or_path:
        check_tokenizer_source(
            str(tokenizer.tokenizer_name_or_path),
            tokenizer.tokenizer_revision,
            setting="tokenizer.tokenizer_name_or_path in the training config",
        )
    if section.asynchronous is not None and section.held_out_specs:
        _check_held_out(section, config)


def _check_held_out(section: Any, config: Any) -> None:
    """Each held-out domain built as a launched evaluation builds it (the training's tokenizer,
    sequence length and model), so that bad held-out input stops `train` before step 1 rather than
    failing every checkpoint's evaluation."""
    from lighteval_nanotron.heldout import build_held_out_set
    from lighteval_nanotron.setup.tokenizer import training_tokenizer

    tokenizer = training_tokenizer(config)
    model = config.model.model_config
    length = section.held_out_sequence_length or config.tokens.sequence_length
    for spec in section.held_out_specs:
        build_held_out_set(spec, tokenizer, length, model.vocab_size, model.max_position_embeddings)
