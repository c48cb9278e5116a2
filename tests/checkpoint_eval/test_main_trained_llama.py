"""A tiny Llama trained and saved by current Nanotron's own `DistributedTrainer` (GitHub main, on
CPU/gloo) evaluates at TP1 and PP2 with the same results, and its log-probs equal those of main's
own `LlamaModel` forward (loaded with main's `load_weights`) within 1e-4.

Main's trainer cannot start a Llama from random init (its `LlamaForTraining.init_model_randomly`
hands `config.model` to a parametrizator that reads `config.model.init_method`, AttributeError), so
the run starts from a random checkpoint (`init_method: path`) and trains 2 steps; the checkpoint
evaluated is the one main's trainer wrote at step 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.checkpoint_eval.details_check import read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_versions import only_on_main

pytestmark = only_on_main
TOLERANCE = 1e-4
TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"


def _train_with_mains_trainer(folder: str) -> str:
    """run_distributed worker (1 process): random init checkpoint, then 2 steps of main's trainer."""
    from lighteval_nanotron.checkpoints.nanotron_builder import build_nanotron_model, save_nanotron_checkpoint
    from lighteval_nanotron.cpu.training import build_training_config
    from lighteval_nanotron.models.families.llama.tiny import tiny_llama_config
    from lighteval_nanotron.training.data.synthetic import synthetic_dataloader_for
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import randomize_, tiny_tokenizer

    root = Path(folder)
    model_config = tiny_llama_config()
    context = parallel_context(1, 1, 1)
    model = build_nanotron_model(model_config, context, dtype=torch.float32)
    randomize_(model)
    save_nanotron_checkpoint(model, model_config, context, root / "init")
    del model
    config = build_training_config(model_config, root / "checkpoints", train_steps=2, checkpoint_interval=2,
                                   init_checkpoint_path=root / "init", tokenizer_path=str(root / "init"))  # fmt: skip
    tiny_tokenizer().save_pretrained(root / "init")
    config.save_as_yaml(root / "train.yaml")

    from nanotron.trainer import DistributedTrainer

    trainer = DistributedTrainer(str(root / "train.yaml"))
    trainer.train({stage.name: synthetic_dataloader_for(trainer) for stage in trainer.config.data_stages})
    saved = root / "checkpoints" / "2"
    tiny_tokenizer().save_pretrained(saved)
    return str(saved)


def _mains_own_logprobs(checkpoint: str, pairs: list) -> list:
    """run_distributed worker (1 process): main's LlamaForTraining built and loaded by Nanotron's own
    functions; the summed log-prob of each continuation after its context."""
    from nanotron.config import LlamaConfig, ParallelismArgs
    from nanotron.models import build_model
    from nanotron.models.llama import LlamaForTraining
    from nanotron.random import RandomStates, get_current_random_state
    from nanotron.serialize.weights import load_weights
    from nanotron.trainer import mark_tied_parameters

    from tests.helpers.distributed import parallel_context

    context = parallel_context(1, 1, 1)
    config = LlamaConfig(**json.loads((Path(checkpoint) / "model_config.json").read_text()))
    parallel = ParallelismArgs(dp=1, pp=1, tp=1, tp_mode="ALL_REDUCE", tp_linear_async_communication=False)
    model = build_model(
        model_builder=lambda: LlamaForTraining(config=config, parallel_context=context, parallel_config=parallel,
                                               random_states=RandomStates({"tp_synced": get_current_random_state()})),
        parallel_context=context, dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    mark_tied_parameters(model=model, parallel_context=context, parallel_config=parallel)
    with torch.no_grad():
        load_weights(model=model, parallel_context=context, root_folder=Path(checkpoint))
    model.eval()
    results = []
    with torch.no_grad():
        for context_tokens, continuation in pairs:
            ids = torch.tensor([context_tokens + continuation])
            logits = model.model(input_ids=ids, input_mask=torch.ones_like(ids, dtype=torch.bool))  # [seq, 1, vocab]
            logprobs = torch.log_softmax(logits[:, 0].float(), dim=-1)
            start = len(context_tokens)
            results.append(sum(float(logprobs[start - 1 + i, token]) for i, token in enumerate(continuation)))
    return results


@pytest.fixture(scope="module")
def main_trained_checkpoint(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("main_trained_llama")
    (saved,) = run_distributed(_train_with_mains_trainer, 1, str(folder), timeout=300)
    return Path(saved)


def _cli_main(argv: list) -> int:
    from lighteval_nanotron.cli.main import main

    return main(argv)


def _evaluate(checkpoint: Path, output: Path, layout: tuple) -> dict:
    argv = ["eval", str(checkpoint), "--cpu", "--tasks", TASKS, "--max-samples", "4", "--data-dir", "bundled",
            "--output-dir", str(output), *layout]  # fmt: skip
    world = 2 if layout else 1
    assert run_distributed(_cli_main, world, argv, timeout=240) == [0] * world
    (step_dir,) = [path for path in (output / "details").rglob("*") if path.is_dir() and list(path.glob("*.parquet"))]
    return read_details(step_dir)


def test_main_trainer_checkpoint_scores_the_same_at_tp1_and_pp2_as_mains_forward(main_trained_checkpoint, tmp_path):
    recorded = json.loads((main_trained_checkpoint / "model_config.json").read_text())
    assert {"rope_interleaved", "_attn_implementation", "z_loss_enabled"} <= set(recorded)  # main's keys

    tp1 = _evaluate(main_trained_checkpoint, tmp_path / "tp1", ())
    pp2 = _evaluate(main_trained_checkpoint, tmp_path / "pp2", ("--pp", "2"))
    assert tp1.keys() == pp2.keys() and tp1
    rows = [(a, b) for task in tp1 for a, b in zip(tp1[task], pp2[task], strict=True)]
    pairs, engine = [], []
    for a, b in rows:
        assert a["input_tokens"] == b["input_tokens"] and a["cont_tokens"] == b["cont_tokens"]
        assert max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"])) < TOLERANCE
        for continuation, logprob in zip(a["cont_tokens"], a["logprobs"]):
            pairs.append((list(a["input_tokens"]), list(continuation)))
            engine.append(logprob)
    (reference,) = run_distributed(_mains_own_logprobs, 1, str(main_trained_checkpoint), pairs, timeout=240)
    assert len(reference) == len(engine) > 0
    worst = max(abs(x - y) for x, y in zip(engine, reference))
    assert worst < TOLERANCE, worst
