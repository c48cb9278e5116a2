"""lighteval's and Nanotron's own tools read what we write, unchanged: the installed lighteval's details
loader, Nanotron's two W&B upload scripts, and lighteval's `hash_examples` on the same inputs."""

import os
import subprocess
import sys
from pathlib import Path

import helpers_pipeline
import pytest
from helpers_pipeline import BigramLM

from lighteval_nanotron.pipeline import EvaluationPipeline, PipelineSettings
from lighteval_nanotron.pipeline.summary import summarize
from lighteval_nanotron.tracking import TrackingConfig, results_dir, step_results_file
from tests.helpers.wandb_records import read_run

MC, GEN, PPL = "custom|toy_mc|0", "custom|toy_gen|0", "custom|toy_ppl|0"
MODEL = "toy/bigram"  # a nested model name, as the hook's `<project>/<run>` default
STEPS = {10: 40, 20: 80}  # step -> consumed train samples
REPO = Path(__file__).resolve().parents[2]
NANOTRON_SRC = Path(os.environ.get("NANOTRON_SRC", "/work/nanotron-main-src"))


@pytest.fixture
def written(toy_data, tmp_path):
    """Two training steps evaluated and written (json + details): {step: EvaluationResult}."""
    settings = PipelineSettings(custom_tasks=helpers_pipeline, model_name=MODEL)
    pipeline = EvaluationPipeline.prepare(BigramLM(), f"{MC},{GEN}", settings)
    tracker = TrackingConfig(output_dir=str(tmp_path / "out"), loggers=["json", "details"]).build()
    results = {}
    for step, samples in STEPS.items():
        results[step] = pipeline.run(step=step, consumed_tokens=samples * 32, consumed_train_samples=samples)
        tracker.log(results[step])
    return results


def _nanotron_script(relative: str) -> Path:
    script = NANOTRON_SRC / relative
    if not script.is_file():
        pytest.skip(f"Nanotron's source is not at {NANOTRON_SRC} (set NANOTRON_SRC)")
    return script


def _run_offline(command: list, tmp_path: Path) -> list:
    """Run `command` with W&B offline in tmp_path; the history rows of the one run it logged."""
    pytest.importorskip("wandb")
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true", HOME=str(tmp_path / "home"))
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    return read_run(run_file)[0]


def _import_lighteval_logging() -> None:
    """lighteval's logging modules import `nanotron.config`, which needs this project's import order."""
    pytest.importorskip("lighteval")
    from lighteval_nanotron.cpu import import_nanotron

    import_nanotron()


def test_lighteval_details_loader_reads_our_details(written, tmp_path):
    _import_lighteval_logging()
    from lighteval.logging.evaluation_tracker import EvaluationTracker

    for step, result in written.items():
        tracker = EvaluationTracker(output_dir=str(tmp_path / "out"))
        tracker.general_config_logger.model_name = f"{MODEL}/{step}"  # lighteval's Nanotron run name
        loaded = tracker.load_details_datasets("last", ["custom|toy_mc", "custom|toy_gen"])
        assert set(loaded) == {MC, GEN}
        for task, dataset in loaded.items():
            rows = result.details[task]
            assert dataset.num_rows == len(rows)
            assert dataset["example"] == [row.query for row in rows]
            assert dataset["full_prompt"] == [row.full_prompt for row in rows]
            assert dataset["cont_tokens"] == [row.output_tokens for row in rows]
            assert [m["acc"] for m in dataset["metrics"]] == [row.metrics.get("acc") for row in rows]
        assert sum(m["acc"] for m in loaded[MC]["metrics"]) / loaded[MC].num_rows == result.results[MC]["acc"]


def test_nanotron_log_lighteval_to_wandb_reads_our_results(written, tmp_path):
    script = _nanotron_script("scripts/log_lighteval_to_wandb.py")
    eval_path = results_dir(tmp_path / "out", MODEL)
    command = [sys.executable, str(script), "--eval-path", str(eval_path), "--wandb-name", "compat"]
    rows = [row for row in _run_offline(command, tmp_path) if "iteration_step" in row]
    assert [row["iteration_step"] for row in rows] == list(STEPS)
    assert [row["consumed_train_samples"] for row in rows] == list(STEPS.values())
    for row, result in zip(rows, written.values()):
        assert row[f"{MC}_acc"] == pytest.approx(result.results[MC]["acc"])
        assert row[f"{GEN}_acc"] == pytest.approx(result.results[GEN]["acc"])
        accs = [result.results[task]["acc"] for task in (MC, GEN, "all")]  # the script averages "all" in too
        assert row["all:average_acc"] == pytest.approx(sum(accs) / 3)


def test_nanotron_upload_to_wandb_reads_our_results(written, tmp_path):
    script = _nanotron_script("src/nanotron/eval/upload_to_wandb.py")
    step = 20
    results_path = step_results_file(tmp_path / "out", MODEL, step).parent
    command = [
        sys.executable, str(REPO / "tests" / "helpers" / "nanotron_upload_runner.py"), str(script),
        "--wandb_project", "p", "--wandb_entity", "e", "--model_name", "bigram", "--results_path", str(results_path),
        "--train_step", str(step), "--consumed_tokens", str(STEPS[step] * 32),
    ]  # fmt: skip
    (row,) = [row for row in _run_offline(command, tmp_path) if "train_step" in row]
    result = written[step]
    assert row["train_step"] == step and row["consumed_tokens"] == STEPS[step] * 32
    assert row["toy_mc/acc"] == pytest.approx(result.results[MC]["acc"])
    assert row["toy_gen/em"] == pytest.approx(result.results[GEN]["em"])
    assert not any(key.endswith("_stderr") for key in row)


def test_summary_hash_examples_are_lighteval_s_on_the_same_inputs(toy_data, monkeypatch):
    """The installed lighteval's `DetailsLogger` fed our docs gives our `hash_examples` (tasks with one row
    per doc; lighteval 0.11+ logs one detail per doc, this project one row per doc and sampling method, as
    lighteval 0.10 did). Its other hashes are not comparable: 0.11+ never fills `full_prompt` and hashes
    token lists without 0.10's outer list (docs/tracking.md)."""
    _import_lighteval_logging()
    import xxhash
    from lighteval.logging import info_loggers
    from lighteval.models.model_output import ModelResponse as LightevalResponse
    from lighteval.tasks.requests import Doc as LightevalDoc

    # xxhash >= 4 refuses the str lighteval passes; earlier versions hashed its UTF-8 bytes
    utf8_xxhash = type("utf8_xxhash", (), {"xxh64": staticmethod(lambda text: xxhash.xxh64(text.encode("utf-8")))})
    monkeypatch.setattr(info_loggers, "xxhash", utf8_xxhash)

    settings = PipelineSettings(custom_tasks=helpers_pipeline)
    result = EvaluationPipeline.prepare(BigramLM(), f"{MC},{GEN},{PPL}", settings).run(step=1)
    theirs = info_loggers.DetailsLogger()
    for task_name in (MC, PPL):  # one sampling method: one row per doc
        for row in result.details[task_name]:
            doc = LightevalDoc(query=row.query, choices=row.choices, gold_index=row.gold_index)
            response = LightevalResponse(input_tokens=row.input_tokens, output_tokens=row.output_tokens)
            theirs.log(task_name, doc, response, {})
    theirs.aggregate()
    for task_name in (MC, PPL):
        assert result.summary_tasks[task_name]["hashes"]["hash_examples"] == (
            theirs.compiled_details[task_name].hashes["hash_examples"]
        )

    result.details[MC][0].output_tokens[0].append(0)  # the model answered one token differently
    _, changed = summarize(result.details)
    differ = {name for name, value in changed["hashes"].items() if value != result.summary_general["hashes"][name]}
    assert differ == {"hash_cont_tokens"}
