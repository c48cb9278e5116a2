"""Nanotron's DistributedTrainer trains the tiny Llama on CPU; TP2xPP2 follows the TP1/PP1 loss curve."""

import time
from pathlib import Path

import torch

from lighteval_nanotron.checkpoints.format import read_checkpoint_model
from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (session fixture)
from tests.helpers.training_config import write_tiny_training_yaml

STEPS = 4


def _train(config_file: str):
    """Train from a YAML config with the synthetic loader; return (losses on output ranks, step, seconds)."""
    from nanotron.trainer import DistributedTrainer

    from lighteval_nanotron.training.data.dataloader import (
        build_dataloader,  # the synthetic loader, per data stage under main
    )

    losses = []

    class RecordingTrainer(DistributedTrainer):
        def training_step(self, dataloader):
            returned = super().training_step(dataloader=dataloader)  # (outputs, loss); main adds z-loss and logs
            loss = returned[1]
            losses.append(None if loss is None else loss.item())
            return returned

    trainer = RecordingTrainer(config_file)
    start = time.perf_counter()
    trainer.train(build_dataloader(trainer, cpu=True))
    return losses, trainer.iteration_step, time.perf_counter() - start


def _run(tmp_path: Path, checkpoint: Path, tp: int, pp: int, dp: int):
    config_file = write_tiny_training_yaml(
        tmp_path / f"train_tp{tp}_pp{pp}_dp{dp}.yaml",
        checkpoints_path=str(tmp_path / f"checkpoints_tp{tp}_pp{pp}_dp{dp}"),
        tokenizer_path=str(checkpoint),
        init_checkpoint_path=str(checkpoint),
        tp=tp,
        pp=pp,
        dp=dp,
        train_steps=STEPS,
        checkpoint_interval=STEPS,
        micro_batch_size=2,
        batch_accumulation_per_replica=2,
        learning_rate=1e-2,
    )
    return run_distributed(_train, tp * pp * dp, str(config_file), timeout=240)


def test_distributed_trainer_trains_at_tp2_pp2_like_tp1_pp1(tmp_path, tiny_checkpoint):
    reference = _run(tmp_path, tiny_checkpoint, 1, 1, 1)[0][0]
    results = _run(tmp_path, tiny_checkpoint, 2, 2, 1)

    assert [step for _, step, _ in results] == [STEPS] * 4
    curves = [losses for losses, _, _ in results if losses[0] is not None]
    assert len(curves) == 2  # the two TP ranks of the last pipeline stage
    for curve in curves:
        torch.testing.assert_close(torch.tensor(curve), torch.tensor(reference), atol=1e-5, rtol=0)
    assert reference[-1] < reference[0]
    saved = tmp_path / "checkpoints_tp2_pp2_dp1" / str(STEPS)
    assert (saved / "model").is_dir() and (saved / "config.yaml").is_file()
    assert read_checkpoint_model(saved).model_config.num_hidden_layers == 4
