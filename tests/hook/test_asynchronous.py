"""The hook's asynchronous mode on real Nanotron training on CPU: each saved checkpoint evaluated by a
launched `eval` while training goes on, with the in-loop evaluation's results, in the same output
folder and on the same step axis (TensorBoard, W&B); failures recorded without stopping training;
Slurm jobs against a real single-node Slurm."""

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.helpers.distributed import run_distributed
from tests.helpers.slurm_cluster import SLURM_MISSING, missing_binaries, slurm_cluster, wait_for_job
from tests.helpers.wandb_records import read_run
from tests.hook.training_runs import (
    MODEL_NAME,
    REPO,
    TASKS,
    results_files,
    tensorboard_scalars,
    train_worker,
    write_config,
)

LOCAL_CPU = {"launcher": "local", "cpu": True, "max_in_flight": 1, "status_interval_s": 0.2}
TOLERANCE = 1e-5


def _worker(config_path: str, environment: dict) -> dict:
    """Train with the environment the launched evaluations need (the forkserver's is the session's)."""
    os.environ.update(environment)
    os.environ.pop("WANDB_MODE", None)
    return train_worker(config_path, wandb_mode=None)


def _environment(**extra: str) -> dict:
    return {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_SILENT": "true", **extra}


def _left_behind(children: list) -> list:
    """Launched evaluations still running, and zombies (W&B's own service process may stay)."""
    return [child for child in children if "lighteval_nanotron" in child["cmdline"] or child["state"] == "Z"]


def _metrics(content: dict) -> dict:
    return {task: values for task, values in content["results"].items() if task != "all"}


def test_checkpoints_evaluated_elsewhere_while_training_goes_on_match_the_in_loop_evaluation(tmp_path):
    section = {
        "eval_at_checkpoints": True,
        "loggers": ["json", "details", "tensorboard", "wandb", "log"],
        "wandb_mode": "offline",
        "wandb_project": "async-test",
        "wandb_run_name": "async-run",
        "wandb_dir": str(tmp_path),
        "asynchronous": LOCAL_CPU,
    }
    for name in ("async", "loop"):
        (tmp_path / name).mkdir()
    config = write_config(tmp_path / "async", pp=2, train_steps=4, checkpoint_interval=2, section=section)
    reports = run_distributed(_worker, 2, str(config), _environment(), timeout=600)
    launching = [report for report in reports if report["launches"]]
    assert len(launching) == 1, "one rank launches"  # Nanotron's logging rank: the last stage
    report = launching[0]
    launches = report["launches"]
    assert [(launch["step"], launch["ok"]) for launch in launches] == [(2, True), (4, True)], launches
    assert report["evaluated"] == [2, 4] and report["failures"] == []
    assert len(report["losses"]) == 4
    assert [_left_behind(r["children"]) for r in reports] == [[], []], [r["children"] for r in reports]
    # Launched after its checkpoint's step, by the queue's worker thread that the step after it starts
    # (so no training step waits on sbatch or the output folder): normally during the last step, later
    # only when that thread is scheduled late on a loaded machine; at most one in flight.
    ends = report["step_ends"]
    assert ends[1] < launches[0]["launched_at"] < ends[-1] + (ends[-1] - ends[-2]), (launches[0], ends)
    assert all(later["launched_at"] >= earlier["finished_at"] for earlier, later in zip(launches, launches[1:]))
    print(f"\nstep seconds with asynchronous evaluation (PP2): {[round(s, 3) for s in report['step_seconds']]}")

    reference = dict(section, loggers=["json", "details"])
    del reference["asynchronous"]
    in_loop = write_config(tmp_path / "loop", pp=2, train_steps=4, checkpoint_interval=2, section=reference)
    reference_reports = run_distributed(_worker, 2, str(in_loop), _environment(), timeout=600)
    last_stage = reference_reports[reports.index(report)]  # the same rank: the loss lives on the last stage
    assert last_stage["evaluated"] == [2, 4]
    assert last_stage["losses"] == report["losses"]  # the same training, undisturbed
    print(f"step seconds in the loop (PP2): {[round(s, 3) for s in last_stage['step_seconds']]}")

    launched, looped = results_files(tmp_path / "async" / "eval"), results_files(tmp_path / "loop" / "eval")
    assert sorted(launched) == sorted(looped) == [2, 4]
    worst = 0.0
    for step in (2, 4):
        general, expected = launched[step]["config_general"], looped[step]["config_general"]
        for key in ("training_step", "consumed_tokens", "consumed_train_samples", "model_name", "max_samples"):
            assert general[key] == expected[key], (step, key)
        # the saved checkpoint at PP1 and the live model at PP2 are the same weights, by their fingerprint
        assert general["weights_fingerprint"] == expected["weights_fingerprint"], step
        assert general["parallelism"] == {"tp": 1, "pp": 1, "dp": 1} and general["device"] == "cpu"
        ours, theirs = _metrics(launched[step]), _metrics(looped[step])
        assert set(ours) == set(theirs) == set(TASKS)
        for task in TASKS:
            assert set(ours[task]) == set(theirs[task])
            for metric, value in theirs[task].items():
                assert ours[task][metric] == pytest.approx(value, abs=TOLERANCE), (step, task, metric)
                worst = max(worst, abs(ours[task][metric] - value))
    print(f"largest metric difference, launched vs in the loop: {worst:.2e}")
    assert launched[2]["config_general"]["weights_fingerprint"] != launched[4]["config_general"]["weights_fingerprint"]

    scalars = tensorboard_scalars(tmp_path / "async" / "eval" / "tensorboard")
    assert sorted(scalars[f"eval/{TASKS[0]}/acc"]) == [2, 4]
    # the signal across the run, as in the loop (from the results written when each one ends)
    assert sorted(scalars[f"eval_signal/{TASKS[0]}/acc/trend"]) == [2, 4]
    for step in (2, 4):
        signal = launched[step]["signal"]["series"][TASKS[0]]["acc"]
        assert signal["step"] == step and 1 <= signal["evaluations"] <= step // 2

    files = sorted(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    runs = {path.stem.removeprefix("run-"): read_run(path) for path in files}
    training_id = next(run_id for run_id in runs if "-eval-" not in run_id)
    assert sorted(runs) == sorted([training_id] + [f"{training_id}-eval-{step}" for step in (2, 4)])
    training_rows, training_metrics, training_run = runs[training_id]
    assert training_run["group"] == "async-run"  # the launched evaluations' runs join it
    losses = [row for row in training_rows if "lm_loss" in row]
    assert losses and training_metrics["lm_loss"] == "iteration_step"
    for step in (2, 4):
        rows, step_metrics, run = runs[f"{training_id}-eval-{step}"]
        assert (run["group"], run["name"]) == ("async-run", f"async-run-eval-{step}")
        assert step_metrics["eval/*"] == "train/step"
        (row,) = [row for row in rows if f"eval/{TASKS[0]}/acc" in row]
        # One axis: the training step, under the key the training run's loss uses too.
        assert row["train/step"] == row["iteration_step"] == step
        assert row[f"eval/{TASKS[0]}/acc"] == pytest.approx(launched[step]["results"][TASKS[0]]["acc"])
        assert row["train/consumed_tokens"] == launched[step]["config_general"]["consumed_tokens"]


def test_failed_evaluations_are_recorded_and_training_goes_on(tmp_path):
    interval_file = tmp_path / "eval_interval.txt"
    interval_file.write_text("2\n")  # read at each save: only step 2 is wanted (eval_interval 1 says 1 and 2)
    section = {
        "eval_interval": 1,
        "eval_interval_file": str(interval_file),
        "eval_at_end": False,
        "loggers": ["json", "log"],
        "asynchronous": {**LOCAL_CPU, "timeout_s": 1},  # no evaluation finishes its imports within 1 s
    }
    config = write_config(tmp_path, train_steps=2, checkpoint_interval=1, section=section)
    (report,) = run_distributed(_worker, 1, str(config), _environment(), timeout=300)
    assert len(report["losses"]) == 2 and report["evaluated"] == [] and _left_behind(report["children"]) == []
    assert [launch["step"] for launch in report["launches"]] == [2]
    ((step, failure),) = report["failures"]
    assert step == 2 and "timed out (exit status 124)" in failure, failure
    assert "eval.log" in failure and results_files(tmp_path / "eval") == {}

    # A training that died with step 2 queued, not launched yet (its trace, no script), resumes from
    # it: step 2 is launched now (it was lost for good: the resumed run saves steps 3 on, 3 not wanted).
    launches = tmp_path / "eval" / "launches" / MODEL_NAME
    (launches / "2" / "eval.sh").unlink()
    assert sorted(path.name for path in (launches / "2").iterdir()) == ["eval.log", "queued"]
    resumed = yaml.safe_load(config.read_text())
    resumed["checkpoints"]["resume_checkpoint_path"] = str(tmp_path / "checkpoints" / "2")
    resumed["tokens"]["train_steps"] = 3
    (tmp_path / "resumed.yaml").write_text(yaml.safe_dump(resumed))
    (report,) = run_distributed(_worker, 1, str(tmp_path / "resumed.yaml"), _environment(), timeout=300)
    assert len(report["losses"]) == 1 and [launch["step"] for launch in report["launches"]] == [2]
    assert [step for step, _ in report["failures"]] == [2] and _left_behind(report["children"]) == []
    ((setup_line,),) = [report["async_setup_log"]]  # step 2 is queued again, not already evaluated
    assert setup_line.endswith("already evaluated: none"), setup_line


def test_slurm_jobs_from_the_hook_against_a_real_slurm(tmp_path):
    missing = missing_binaries()
    if missing:
        pytest.skip(SLURM_MISSING.format(missing=", ".join(missing)))
    with slurm_cluster(tmp_path / "slurm") as env:
        section = {
            "eval_at_checkpoints": True,
            "loggers": ["json", "details"],
            "asynchronous": {
                "launcher": "slurm",
                "cpu": True,
                "slurm": {"time": "00:05:00", "env_setup": [f"export PYTHONPATH={REPO}"]},
            },
        }
        config = write_config(tmp_path, train_steps=2, checkpoint_interval=2, section=section)
        (report,) = run_distributed(_worker, 1, str(config), _environment(SLURM_CONF=env["SLURM_CONF"]), timeout=300)
        assert len(report["losses"]) == 2 and report["failures"] == []
        ((launch,),) = [report["launches"]]
        assert launch["step"] == 2 and launch["where"].startswith("Slurm job ") and launch["ok"] is None
        job_id = launch["where"].removeprefix("Slurm job ")
        logs = tmp_path / "eval" / "launches" / MODEL_NAME / "2"
        assert wait_for_job(job_id, env, timeout=240) == "COMPLETED", [p.read_text() for p in logs.glob("*.out")]
    script = (logs / "eval.sbatch").read_text().splitlines()
    assert [line for line in script if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=eval-hook-test-2", f"#SBATCH --output={logs}/slurm-%j.out", "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1", "#SBATCH --time=00:05:00",
    ]  # fmt: skip
    (content,) = results_files(tmp_path / "eval").values()
    general = content["config_general"]
    assert (general["training_step"], general["consumed_tokens"]) == (2, 2 * 2 * 32)  # 2 samples of 32 per step
    assert general["checkpoint"] == str(tmp_path / "checkpoints" / "2")
    assert set(_metrics(content)) == set(TASKS)
    assert json.loads(json.dumps(content))  # a complete results file


def _eval_once(argv: list) -> int:
    """run_distributed worker: `lighteval-nanotron eval` with `argv`, its exit status."""
    from lighteval_nanotron.cli.main import main

    return main(argv)


def _evaluate_once(checkpoint: str, output_dir: str) -> None:
    """run_distributed worker: `lighteval_nanotron.evaluate(...)` of `checkpoint`, as the README calls it."""
    from transformers import AutoTokenizer

    from lighteval_nanotron import evaluate
    from lighteval_nanotron.checkpoints.nanotron_builder import load_nanotron_checkpoint
    from tests.helpers.distributed import parallel_context
    from tests.hook.training_runs import TOKENIZER

    context = parallel_context(1, 1, 1)
    model, _ = load_nanotron_checkpoint(checkpoint, context)
    evaluate(model, context, AutoTokenizer.from_pretrained(str(TOKENIZER)), tasks=",".join(TASKS), max_samples=4,
             data_dirs=["bundled"], tokens_per_batch=1024, model_name=MODEL_NAME, output_dir=output_dir,
             loggers=["json"], step=2)  # fmt: skip


def test_one_checkpoint_through_every_way_in_has_the_same_scores_and_identity(tmp_path):
    """Step 2 of one training evaluated by the hook in the loop, by its asynchronous mode, by `eval`
    and by `evaluate()`: the same scores and the same recorded identity (options, prompt settings,
    dtype, weights), each task's docs digest too."""
    section = {"eval_at_checkpoints": True, "eval_at_end": False, "loggers": ["json"]}
    for name in ("loop", "async"):
        (tmp_path / name).mkdir()
    loop = write_config(tmp_path / "loop", train_steps=2, checkpoint_interval=2, section=section)
    assert run_distributed(_worker, 1, str(loop), _environment(), timeout=600)[0]["evaluated"] == [2]
    launched = dict(section, asynchronous=LOCAL_CPU)
    launching = write_config(tmp_path / "async", train_steps=2, checkpoint_interval=2, section=launched)
    assert run_distributed(_worker, 1, str(launching), _environment(), timeout=600)[0]["evaluated"] == [2]
    checkpoint = tmp_path / "loop" / "checkpoints" / "2"
    argv = ["eval", str(checkpoint), "--cpu", "--tasks", ",".join(TASKS), "--max-samples", "4", "--data-dir",
            "bundled", "--tokens-per-batch", "1024", "--model-name", MODEL_NAME, "--loggers", "json",
            "--output-dir", str(tmp_path / "eval" / "eval")]  # fmt: skip
    assert run_distributed(_eval_once, 1, argv, timeout=300) == [0]
    run_distributed(_evaluate_once, 1, str(checkpoint), str(tmp_path / "evaluate" / "eval"), timeout=300)

    written = {way: results_files(tmp_path / way / "eval")[2] for way in ("loop", "async", "eval", "evaluate")}
    reference = written["loop"]
    identity = reference["config_general"]["identity"]
    assert identity["dtype"] == "float32" and len(identity["weights_fingerprint"]) == 32
    assert identity["pairwise_tokenization"] is False and identity["tokenizer_sha256"]
    for way, content in written.items():
        assert content["config_general"]["identity"] == identity, way
        assert _metrics(content).keys() == _metrics(reference).keys() == set(TASKS), way
        for task in TASKS:
            assert content["config_tasks"][task]["docs_sha256"] == reference["config_tasks"][task]["docs_sha256"]
            for metric, value in reference["results"][task].items():
                assert content["results"][task][metric] == pytest.approx(value, abs=TOLERANCE), (way, task, metric)
