"""`attach_evaluation` on a plain `DistributedTrainer` (built as Nanotron's own run_train.py builds
it) evaluates at the configured steps, as `EvaluatingTrainer` does: one wiring, used by both."""

from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import TASKS, assert_finite_results, results_files, write_config


def _attached_worker(config_path: str) -> dict:
    """run_distributed worker: Nanotron's own trainer class, evaluation attached afterwards."""
    import os

    os.environ["WANDB_MODE"] = "disabled"
    from lighteval_nanotron.errors import ConfigError
    from lighteval_nanotron.hook.trainer import DistributedTrainer, attach_evaluation  # Nanotron's, after the stand-ins
    from lighteval_nanotron.hook.training_config import TrainingConfigWithEvaluation
    from lighteval_nanotron.training.data.dataloader import build_dataloader

    trainer = DistributedTrainer(config_path, config_class=TrainingConfigWithEvaluation)
    evaluator = attach_evaluation(trainer)
    try:
        attach_evaluation(trainer)
        twice = None
    except ConfigError as error:
        twice = str(error)
    trainer.train(build_dataloader(trainer, cpu=True))
    return {"evaluated": evaluator.evaluated, "failures": evaluator.failures, "twice": twice}


def test_attach_evaluation_to_a_plain_trainer(tmp_path):
    config = write_config(tmp_path, train_steps=4)
    (report,) = run_distributed(_attached_worker, 1, str(config), timeout=300)
    assert report["evaluated"] == [2, 4] and report["failures"] == []
    assert "attach at most once" in report["twice"]
    found = results_files(tmp_path / "eval")
    assert sorted(found) == [2, 4]
    for content in found.values():
        assert_finite_results(content, TASKS)
