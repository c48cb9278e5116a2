"""`lighteval-nanotron eval` end to end on a converted tiny Hugging Face Llama: launched with torchrun
at TP2, through `run_distributed` at PP2 and DP2 (backfill), and as a single process; every
per-document log-likelihood equals transformers' on the same tokens."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lighteval_nanotron.parallel.distributed import free_loopback_port
from lighteval_nanotron.tracking import results_files_by_step
from tests.checkpoint_eval.details_check import max_logprob_difference, read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.tiny_model import tiny_tokenizer

TASKS = "lighteval|arc:easy|0,leaderboard|mmlu:abstract_algebra|0"  # multi-token and single-token choices
TOLERANCE = 1e-4  # fp32; log-probs here are sums of up to ~20 tokens of magnitude ~10
REPO = Path(__file__).resolve().parents[2]
CUSTOM_TASKS = Path(__file__).parent / "capitals_tasks.py"


def _argv(checkpoint: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        "eval", str(checkpoint), "--cpu", "--tasks", TASKS, "--max-samples", "4",
        "--data-dir", "bundled", "--output-dir", str(output_dir), *extra,
    ]  # fmt: skip


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _only_step_dir(output_dir: Path, model_name: str = "converted/nanotron") -> Path:
    (step_dir,) = (output_dir / "details" / model_name).iterdir()
    return step_dir


def _cli_main(argv: list) -> int:
    """run_distributed worker: the CLI's main in this rank."""
    from lighteval_nanotron.cli.main import main

    return main(argv)


def test_torchrun_tp2_matches_transformers(tiny_converted, tmp_path):
    model, checkpoint = tiny_converted
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
        "--master-port", str(free_loopback_port()), "-m", "lighteval_nanotron",
        *_argv(checkpoint, tmp_path / "out", "--tp", "2"),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # acc, acc_norm, their centered values and the cost row, from one rank
    assert done.stdout.count("| lighteval|arc:easy|0") == 5
    (results_file,) = (tmp_path / "out" / "results" / "converted" / "nanotron").rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert set(results["results"]) == {"lighteval|arc:easy|0", "leaderboard|mmlu:abstract_algebra|0", "all"}
    assert results["config_general"]["parallelism"] == {"tp": 2, "pp": 1, "dp": 1}
    assert results["config_general"]["checkpoint"] == str(checkpoint)
    details = read_details(_only_step_dir(tmp_path / "out"))
    assert {task: len(rows) for task, rows in details.items()} == {
        "lighteval|arc:easy|0": 4,
        "leaderboard|mmlu:abstract_algebra|0": 4,
    }
    assert max_logprob_difference(model, details, tiny_tokenizer()) < TOLERANCE
    assert list((tmp_path / "out" / "tensorboard").iterdir())


def _counting_cli_main(argv: list) -> dict:
    """run_distributed worker: the CLI's main, and how often this rank opened a dataset / tokenized."""
    import torch.distributed as dist

    from tests.helpers.setup_counts import count_setup_work

    counts = count_setup_work()
    assert _cli_main(argv) == 0
    return {"rank": dist.get_rank(), **counts}


def test_pp2_with_a_task_file_and_custom_tasks_matches_transformers(tiny_converted, tmp_path):
    model, checkpoint = tiny_converted
    task_file = tmp_path / "tasks.txt"
    task_file.write_text("# tasks of this test\nlighteval|arc:easy|0\n\ncustom|capitals|0\n")
    argv = _argv(checkpoint, tmp_path / "out", "--pp", "2", "--custom-tasks", str(CUSTOM_TASKS))
    argv[argv.index("--tasks") + 1] = str(task_file)
    counts = run_distributed(_counting_cli_main, 2, argv, timeout=240)
    # setup once: world rank 0 opens each dataset, the reporting rank (PP stage 1) tokenizes once
    assert counts == [{"rank": 0, "dataset_opens": 2}, {"rank": 1, "tokenizations": 1}]
    details = read_details(_only_step_dir(tmp_path / "out"))
    assert {task: len(rows) for task, rows in details.items()} == {"lighteval|arc:easy|0": 4, "custom|capitals|0": 4}
    assert max_logprob_difference(model, details, tiny_tokenizer()) < TOLERANCE


def test_single_process_without_torchrun(tiny_converted, tmp_path):
    model, checkpoint = tiny_converted
    argv = _argv(checkpoint, tmp_path / "out", "--dtype", "float32", "--fewshot-draws", "per_doc")
    command = [sys.executable, "-m", "lighteval_nanotron", *argv]
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert max_logprob_difference(model, read_details(_only_step_dir(tmp_path / "out"))) < TOLERANCE
    (results_file,) = (tmp_path / "out" / "results").rglob("results_*.json")
    config_tasks = json.loads(results_file.read_text())["config_tasks"]
    assert [c["fewshot_sampling"]["draws"] for c in config_tasks.values()] == ["per_doc", "per_doc"]

    too_big = [sys.executable, "-m", "lighteval_nanotron", *_argv(checkpoint, tmp_path / "out2", "--tp", "2")]
    done = subprocess.run(too_big, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "needs 2 processes" in done.stderr and "`lighteval-nanotron torchrun --nproc-per-node 2 eval" in done.stderr


def _write_run(root: Path, steps: dict) -> Path:
    """A training output folder: one step folder per {step: checkpoint}, plus noise to ignore."""
    run = root / "checkpoints"
    for step, checkpoint in steps.items():
        shutil.copytree(checkpoint, run / str(step))
    (run / "40" / "model").mkdir(parents=True)  # being written: no checkpoint_metadata.json yet
    (run / "latest.txt").write_text("30")
    (run / "notes").mkdir()
    return run


def test_backfill_evaluates_missing_steps_in_order_and_reloads_weights(tiny_converted, tiny_converted_other, tmp_path):
    (model_a, checkpoint_a), (model_b, checkpoint_b) = tiny_converted, tiny_converted_other
    run = _write_run(tmp_path, {30: checkpoint_b, 10: checkpoint_a, 20: checkpoint_a})
    out = tmp_path / "out"
    done_file = out / "results" / "tiny" / "10" / "results_2024-01-01T00-00-00.json"
    done_file.parent.mkdir(parents=True)
    done = {"config_general": {"max_samples": 4}, "results": {task: {"acc": 0.5} for task in TASKS.split(",")}}
    done_file.write_text(json.dumps(done))  # every task at this max_samples: step 10 is done
    argv = _argv(checkpoint_a, out, "--dp", "2", "--model-name", "tiny")
    argv[1:2] = ["--checkpoints-dir", str(run)]

    assert run_distributed(_cli_main, 2, argv, timeout=240) == [0, 0]
    assert json.loads(done_file.read_text()) == done
    written = results_files_by_step(out, "tiny")
    assert sorted(written) == [10, 20, 30] and written[10] == done_file
    assert json.loads(written[30].read_text())["config_general"]["training_step"] == 30
    # each backfilled step carries the signal across the run so far: step 10's file, then 20, then 30
    task = TASKS.split(",")[0]
    evaluations = [json.loads(written[s].read_text())["signal"]["series"][task]["acc"]["evaluations"] for s in (20, 30)]
    assert evaluations == [2, 3]
    details_root = out / "details" / "tiny"
    assert sorted(p.name for p in details_root.iterdir()) == ["20", "30"]
    assert max_logprob_difference(model_a, read_details(details_root / "20")) < TOLERANCE
    assert max_logprob_difference(model_b, read_details(details_root / "30")) < TOLERANCE

    stamps = {p: p.stat().st_mtime_ns for p in (out / "results").rglob("*.json")}
    assert run_distributed(_cli_main, 2, argv, timeout=240) == [0, 0]  # nothing left to do
    assert {p: p.stat().st_mtime_ns for p in (out / "results").rglob("*.json")} == stamps

    # the signal across the backfilled steps (the hand-written step 10 has no step key: its folder says it)
    assert _cli_main(["report", str(out)]) == 0
    assert (out / "plots" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
