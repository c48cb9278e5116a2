"""A tiny Qwen2 (dense and MoE) built, randomly initialised and saved by current Nanotron's own code
(`build_model`, `init_model_randomly`, `save_weights`, `save_meta`, `Config.save_as_yaml`, and
`model_config.json` as its trainer writes it) evaluates with `lighteval-nanotron eval` at TP1, PP2
and TP2 with the same results, and the engine equals Nanotron's own Qwen2 forward; so does a tiny
MoE Qwen2 trained 2 steps and saved by main's `DistributedTrainer` (from its random init, on the
synthetic batches of `training.data.synthetic`, with the `position_ids` Qwen2 takes). Needs GitHub main."""

from __future__ import annotations

from pathlib import Path

import pytest

from lighteval_nanotron.models.families.qwen2.tiny import tiny_qwen2_config
from tests.checkpoint_eval.details_check import read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_main import requires_qwen2

pytestmark = requires_qwen2
TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"
TOLERANCE = 1e-4
MAX_LENGTH = 256


def save_with_nanotron(folder: str, moe: bool, overrides: dict) -> None:
    """Rank function (world 1): the checkpoint as Nanotron main's own code writes it."""
    import dataclasses
    import json

    import torch
    from nanotron.config import Config, GeneralArgs, ModelArgs, ParallelismArgs, RandomInit, TokenizerArgs
    from nanotron.models import build_model
    from nanotron.models.qwen import Qwen2ForTraining
    from nanotron.random import RandomStates, get_current_random_state
    from nanotron.serialize.metadata import TrainingMetadata, save_meta
    from nanotron.serialize.weights import save_weights
    from nanotron.trainer import mark_tied_parameters

    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer

    root = Path(folder)
    context = parallel_context(1, 1, 1)
    model_config = tiny_qwen2_config(moe, **overrides)
    parallel = ParallelismArgs(dp=1, pp=1, tp=1)
    config = Config(
        general=GeneralArgs(project="qwen2", run="ckpt", seed=7),
        parallelism=parallel,
        model=ModelArgs(model_config=model_config, init_method=RandomInit(std=0.3), dtype=torch.float32),
        tokenizer=TokenizerArgs(tokenizer_name_or_path=str(root)),
    )
    torch.manual_seed(7)
    model = build_model(
        model_builder=lambda: Qwen2ForTraining(
            config=model_config,
            parallel_context=context,
            parallel_config=parallel,
            random_states=RandomStates({"tp_synced": get_current_random_state()}),
        ),  # fmt: skip
        parallel_context=context,
        dtype=torch.float32,
        device=torch.device("cpu"),
    )
    mark_tied_parameters(model=model, parallel_context=context, parallel_config=parallel)
    model.init_model_randomly(config=config)
    save_weights(model=model, parallel_context=context, root_folder=root)
    save_meta(parallel_context=context, root_folder=root, training_metadata=TrainingMetadata(0, 0, data_stages=[]))
    config.save_as_yaml(root / "config.yaml")
    (root / "model_config.json").write_text(json.dumps(dataclasses.asdict(model_config)))
    tiny_tokenizer().save_pretrained(root)


def train_with_nanotron(folder: str) -> str:
    """Rank function (world 1): an MoE Qwen2 from main's random init, 2 steps of main's trainer."""
    from lighteval_nanotron.cpu.training import build_training_config
    from lighteval_nanotron.training.data.synthetic import synthetic_dataloader_for
    from tests.helpers.tiny_model import tiny_tokenizer

    root = Path(folder)
    tiny_tokenizer().save_pretrained(root / "tokenizer")
    model_config = tiny_qwen2_config(True, log_attn_probs=False)  # the CPU flash-attn cannot return probabilities
    config = build_training_config(model_config, root / "checkpoints", train_steps=2, checkpoint_interval=2,
                                   tokenizer_path=str(root / "tokenizer"), init_std=0.3)  # fmt: skip
    config.save_as_yaml(root / "train.yaml")
    from nanotron.trainer import DistributedTrainer

    trainer = DistributedTrainer(str(root / "train.yaml"))
    stages = trainer.config.data_stages
    trainer.train({stage.name: synthetic_dataloader_for(trainer) for stage in stages})
    saved = root / "checkpoints" / "2"
    tiny_tokenizer().save_pretrained(saved)
    return str(saved)


def engine_and_nanotron_forward(checkpoint: str) -> list[tuple[list[float], list[float]]]:
    """Rank function (TP1/PP1): each doc's choice log-probs from the engine and from Nanotron main's
    own `Qwen2Model.forward` (`[batch * seq]` ids with position ids, flash varlen attention)."""
    import torch

    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from lighteval_nanotron.models.engine import EngineConfig, NanotronLightevalModel
    from lighteval_nanotron.models.engine.tokenization import TokenizerAdapter, encode_pair, score_window
    from lighteval_nanotron.tasks.prompt_manager import PromptManager
    from tests.helpers.distributed import parallel_context
    from tests.helpers.tiny_model import tiny_tokenizer
    from tests.models.engine_cases import engine_docs

    context = parallel_context(1, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    engine = NanotronLightevalModel(model, context, tiny_tokenizer(), EngineConfig(max_length=MAX_LENGTH))
    tok, prompt = TokenizerAdapter(tiny_tokenizer()), PromptManager().prepare_prompt
    for module in model.modules():  # main's default `log_attn_probs: true` asks flash-attn for the probabilities
        if hasattr(module, "log_attn_probs"):
            module.log_attn_probs = False
    pairs = []
    for doc, response in zip(engine_docs(), engine.loglikelihood(engine_docs()), strict=True):
        model.eval()
        forward = []
        for choice in doc.choices:
            window, _ = score_window(*encode_pair(tok, prompt(doc), choice, True, False), MAX_LENGTH)
            ids = torch.tensor([window.input_ids])
            with torch.no_grad():
                positions = torch.arange(ids.shape[1])[None]
                logprobs = model.model(input_ids=ids, position_ids=positions).double().log_softmax(-1)
            targets = range(window.start, window.start + len(window.targets))
            forward.append(sum(logprobs[p, t].item() for p, t in zip(targets, window.targets)))
        pairs.append((response.logprobs, forward))
    return pairs


@pytest.fixture(scope="module", params=["dense", "dense-no-rope", "moe", "moe-trained"])
def nanotron_checkpoint(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(f"main_qwen2_{request.param}")
    if request.param == "moe-trained":
        (saved,) = run_distributed(train_with_nanotron, 1, str(folder), timeout=300)
        return Path(saved)
    overrides = {"no_rope_layer": 2} if request.param == "dense-no-rope" else {}  # layer 1 without rotary
    run_distributed(save_with_nanotron, 1, str(folder / "ckpt"), request.param == "moe", overrides, timeout=120)
    return folder / "ckpt"


def test_checkpoint_is_read_as_qwen2(nanotron_checkpoint):
    from lighteval_nanotron.checkpoints.format import read_checkpoint_model

    checkpoint_model = read_checkpoint_model(nanotron_checkpoint)
    assert checkpoint_model.family.name == "qwen2" and checkpoint_model.carried == {}
    assert checkpoint_model.model_config.rope_theta == 50000.0


def test_engine_equals_nanotron_forward(nanotron_checkpoint):
    (pairs,) = run_distributed(engine_and_nanotron_forward, 1, str(nanotron_checkpoint), timeout=180)
    for engine, forward in pairs:
        assert engine == pytest.approx(forward, abs=TOLERANCE)
    assert len({round(logprob, 3) for engine, _ in pairs for logprob in engine}) > 2  # choices score differently


def _cli_main(argv: list) -> int:
    from lighteval_nanotron.cli.main import main

    return main(argv)


def _logprobs(folder: Path, out: Path, layout: tuple, world: int) -> dict:
    argv = ["eval", str(folder), "--cpu", "--tasks", TASKS, "--max-samples", "4", "--data-dir", "bundled",
            "--output-dir", str(out), *layout]  # fmt: skip
    assert run_distributed(_cli_main, world, argv, timeout=240) == [0] * world
    (step_dir,) = [path for path in (out / "details").rglob("*") if path.is_dir() and any(path.glob("*.parquet"))]
    return {task: [row["logprobs"] for row in rows] for task, rows in read_details(step_dir).items()}


def test_eval_is_the_same_at_tp1_pp2_and_tp2(nanotron_checkpoint, tmp_path):
    baseline = _logprobs(nanotron_checkpoint, tmp_path / "tp1", (), 1)
    for name, layout in (("pp2", ("--pp", "2")), ("tp2", ("--tp", "2"))):
        other = _logprobs(nanotron_checkpoint, tmp_path / name, layout, 2)
        assert other.keys() == baseline.keys()
        for task, rows in baseline.items():
            for got, want in zip(other[task], rows, strict=True):
                assert got == pytest.approx(want, abs=TOLERANCE), (name, task)
