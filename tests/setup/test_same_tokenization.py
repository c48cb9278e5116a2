"""The training hook and `eval` tokenize one checkpoint's tasks identically: the same setup
builder (`setup.tokenizer`, `setup.engine.build_engine`, `setup.tasks.prepare_pipeline`) from the
same options, the hook's tokenizer named by the training config, `eval`'s found from the
checkpoint."""

from pathlib import Path

import yaml

from tests.checkpoint_eval.tiny_hf import convert_tiny
from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import write_config

SHARED = {"tasks": "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0", "max_samples": 4,
          "data_dirs": ["bundled"]}  # fmt: skip


def _plan_tokens(pipeline) -> list:
    """Every prepared micro-batch's input ids, targets and result slots, in plan order."""
    return [
        (batch.input_ids.tolist(), batch.targets.tolist(), batch.slots.tolist())
        for plan in pipeline.prepared.plans
        for batch in plan.batches
    ]


def _both_ways(checkpoint: str, training_yaml: str) -> dict:
    """run_distributed worker: the requests `eval` prepares for the checkpoint, and those the
    hook prepares from the training config, over the same model on one mesh."""
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig
    from lighteval_nanotron.checkpoint_eval.mesh_setup import parallel_context_for
    from lighteval_nanotron.checkpoint_eval.runner import CheckpointEvaluator, plan_evaluation
    from lighteval_nanotron.hook.training_config import load_training_config
    from lighteval_nanotron.options.hook import EvaluationConfig
    from lighteval_nanotron.parallel.deadline import bounded_collectives
    from lighteval_nanotron.setup.engine import training_engine
    from lighteval_nanotron.setup.tasks import load_tasks, prepare_pipeline

    eval_config = CheckpointEvalConfig(checkpoint=checkpoint, cpu=True, loggers=["json"], **SHARED)
    with parallel_context_for(1, 1, 1, cpu=True) as parallel_context, bounded_collectives(parallel_context, 240):
        plan = plan_evaluation(eval_config, parallel_context)
        evaluator = CheckpointEvaluator(eval_config, parallel_context, plan)
        try:
            by_eval = evaluator.step_for(plan.checkpoints[0].step).pipeline
            section = EvaluationConfig(**SHARED)
            engine = training_engine(load_training_config(training_yaml), evaluator.model, parallel_context, section)
            by_hook = prepare_pipeline(engine, load_tasks(section), section, "hook")
        finally:
            evaluator.close()
        tokenizers = [by_eval.model.runtime.tok.tokenizer, engine.runtime.tok.tokenizer]
        return {
            "tokenizers": [type(tokenizer).__name__ for tokenizer in tokenizers],
            "sources": [tokenizer.name_or_path for tokenizer in tokenizers],
            "eval": _plan_tokens(by_eval),
            "hook": _plan_tokens(by_hook),
        }


def test_hook_and_eval_tokenize_a_checkpoint_alike(tmp_path):
    from tests.helpers.tiny_model import tiny_tokenizer

    _, checkpoint = convert_tiny(tmp_path / "tiny")  # its folder holds a copy of the tokenizer
    tiny_tokenizer().save_pretrained(tmp_path / "tokenizer")  # the folder the training names
    (tmp_path / "run").mkdir()
    training_yaml = write_config(tmp_path / "run")
    content = yaml.safe_load(training_yaml.read_text())
    content["tokenizer"]["tokenizer_name_or_path"] = str(tmp_path / "tokenizer")
    training_yaml.write_text(yaml.safe_dump(content))

    (report,) = run_distributed(_both_ways, 1, str(checkpoint), str(training_yaml), timeout=240)
    assert report["tokenizers"] == ["FastTokenizer", "FastTokenizer"]  # one loading path
    assert [Path(source).name for source in report["sources"]] == ["nanotron", "tokenizer"]  # from two places
    assert report["eval"] and report["hook"] == report["eval"]
