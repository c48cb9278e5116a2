"""Launching a checkpoint's evaluation elsewhere: the scripts (bash-checked, their #SBATCH lines), the
local launcher (a real `eval` process group: done, or killed at its timeout and recorded), and the
Slurm launcher against a real single-node Slurm (a job that completes, one that is cancelled)."""

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.launch.job import EvalJob, cleaned_environment, eval_arguments
from lighteval_nanotron.launch.launchers import (
    LocalLauncher,
    SlurmLaunch,
    SlurmLauncher,
    launch_history,
    slurm_job_state,
)
from lighteval_nanotron.launch.queue import LaunchQueue
from lighteval_nanotron.launch.script import local_script, read_template, sbatch_options, slurm_script
from lighteval_nanotron.options.checkpoint_eval import CheckpointEvalConfig
from lighteval_nanotron.options.hook import EvaluationConfig
from lighteval_nanotron.options.launch import AsyncEvaluationConfig, SlurmSettings
from lighteval_nanotron.tracking import results_files_by_step
from tests.helpers.slurm_cluster import SLURM_MISSING, missing_binaries, slurm_cluster, wait_for_job
from tests.helpers.tiers import reaches

REPO = Path(__file__).resolve().parents[2]
TASK = "lighteval|arc:easy|0"


def _section(tmp_path: Path, **options) -> EvaluationConfig:
    """The hook section's options a launched evaluation is given."""
    defaults = {
        "tasks": TASK, "output_dir": str(tmp_path / "out"), "loggers": ["json", "details", "log"],
        "data_dirs": ["bundled"], "max_samples": 4, "tokens_per_batch": 1024, "failure_timeout_s": 60,
    }  # fmt: skip
    return EvaluationConfig(**{**defaults, **options})


def _job(tmp_path: Path, checkpoint: Path, settings: AsyncEvaluationConfig, step: int, **section) -> EvalJob:
    env = {**cleaned_environment(), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    args = eval_arguments(_section(tmp_path, **section), checkpoint, "tiny", settings, None)
    return EvalJob(
        step=step, checkpoint=checkpoint, eval_args=args, exports={"EXAMPLE": "a b"}, base_env=env,
        scripts_dir=tmp_path / "launches" / str(step), logs_dir=tmp_path / "logs" / str(step), workdir=tmp_path,
        python=sys.executable, name=f"eval-tiny-{step}",
    )  # fmt: skip


@reaches("distributed")  # the launchers run them as processes
def _fake_commands(tmp_path: Path, scripts: dict[str, str]) -> dict[str, str]:
    """Stand-ins for Slurm's commands (`{name: shell script}`): the PATH that finds them first."""
    commands = tmp_path / "bin"
    commands.mkdir()
    for name, script in scripts.items():
        (commands / name).write_text(f"#!/bin/sh\n{script}\n")
        (commands / name).chmod(0o755)
    return {"PATH": f"{commands}:{os.environ['PATH']}"}


def _with_env(job: EvalJob, env: dict[str, str]) -> EvalJob:
    return dataclasses.replace(job, base_env={**job.base_env, **env})


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="devices"):
        AsyncEvaluationConfig(launcher="local")  # GPUs without saying which
    with pytest.raises(ConfigError, match="groups of tp x pp x dp = 2"):
        AsyncEvaluationConfig(launcher="local", devices="6,7,5", tp=2)
    with pytest.raises(ConfigError, match="max_in_flight=2 needs 4 GPUs"):
        AsyncEvaluationConfig(launcher="local", devices=[6, 7], tp=2, max_in_flight=2)
    assert AsyncEvaluationConfig(launcher="local", devices=[4, 5, 6, 7], tp=2, max_in_flight=2).device_list == [
        "4", "5", "6", "7",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="launcher is 'local'"):
        AsyncEvaluationConfig(cpu=True, slurm=SlurmSettings())
    with pytest.raises(ConfigError, match="whole nodes"):
        AsyncEvaluationConfig(launcher="slurm", tp=3, dp=4, slurm=SlurmSettings(gpus_per_node=8))
    with pytest.raises(ConfigError, match="extra_sbatch"):
        AsyncEvaluationConfig(launcher="slurm", slurm=SlurmSettings(extra_sbatch=["exclusive"]))
    with pytest.raises(ConfigError, match=r"^lighteval_nanotron\.asynchronous\.launcher is 'ssh'"):
        AsyncEvaluationConfig(launcher="ssh")
    with pytest.raises(ConfigError, match=r"^lighteval_nanotron\.asynchronous\.slurm\.gpus_per_node is 0"):
        SlurmSettings(gpus_per_node=0)
    with pytest.raises(ConfigError, match=r"env has 'MY VAR'"):
        AsyncEvaluationConfig(cpu=True, env={"MY VAR": "1"})  # `export MY VAR=1` failed every launch
    with pytest.raises(ConfigError, match=r"^lighteval_nanotron\.asynchronous\.pp is 0"):
        AsyncEvaluationConfig(cpu=True, pp=0)  # the layout's checks, declared once with eval's
    with pytest.raises(ConfigError, match=r"^--pp is 0"):
        CheckpointEvalConfig(checkpoint="ckpt", tasks=TASK, pp=0)


def test_the_launched_command_carries_every_option_of_the_section(tmp_path):
    from lighteval_nanotron.cli.main import build_parser
    from lighteval_nanotron.lighteval_compat.eval_config import eval_config
    from lighteval_nanotron.options import EvaluationOptions, LayoutOptions
    from lighteval_nanotron.options.flags import given_options

    section = _section(
        tmp_path, custom_tasks="tasks.py", fewshot_draws="per_doc", use_chat_template=True, system_prompt="Be brief.",
        multichoice_continuations_start_space=False, generation={"temperature": 0.5, "seed": 3}, bootstrap_iters=10,
        loggers=["json", "tensorboard", "wandb"], tensorboard_prefix="ev", wandb_entity="team", wandb_mode="offline",
        wandb_tags="a,b", data_dirs=["bundled", "/data"], model_name="ignored", progress_bar=True,
        held_out={"web": "/data/web", "code": "/data/code"}, held_out_tokens=5000, held_out_sequence_length=64,
    )  # fmt: skip
    settings = AsyncEvaluationConfig(cpu=True, tp=2, pp=3, dp=2)
    wandb = {"wandb_project": "p", "wandb_group": "g", "wandb_run_name": "run-eval-3", "wandb_run_id": "id-eval-3"}
    args = eval_arguments(section, tmp_path / "3", "org/run", settings, "tok", wandb)
    parsed = build_parser().parse_args(args)
    names = [field.name for field in dataclasses.fields(CheckpointEvalConfig)]
    config = eval_config(given_options(parsed, CheckpointEvalConfig, names))
    launch = {"model_name": "org/run", "progress_bar": False, **wandb}
    for field in dataclasses.fields(EvaluationOptions):
        if field.name == "held_out":  # the section's mapping arrives as the flag's NAME=PATH items
            assert config.held_out_specs == section.held_out_specs
            continue
        assert getattr(config, field.name) == launch.get(field.name, getattr(section, field.name)), field.name
    for field in dataclasses.fields(LayoutOptions):  # the layout's flags, generated as the shared ones
        assert getattr(config, field.name) == getattr(settings, field.name), field.name
    assert (config.checkpoint, config.world_size, config.tokenizer) == (str(tmp_path / "3"), 12, "tok")
    detailed = _section(tmp_path, held_out={"web": {"path": "/data/web", "split": "test"}})
    with pytest.raises(ConfigError, match="--held-out flag cannot carry"):
        eval_arguments(detailed, tmp_path / "3", "org/run", settings, None)


def test_environment_leaves_the_training_behind():
    training = {
        "RANK": "3", "WORLD_SIZE": "8", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x", "SLURM_PROCID": "3",
        "SLURM_NTASKS": "8", "SLURM_CONF": "/etc/slurm.conf", "WANDB_RUN_ID": "abc", "WANDB_API_KEY": "k",
        "PATH": "/bin",
    }  # fmt: skip
    assert cleaned_environment(training) == {"SLURM_CONF": "/etc/slurm.conf", "WANDB_API_KEY": "k", "PATH": "/bin"}


def test_slurm_script_lines(tmp_path):
    slurm = SlurmSettings(
        partition="eval", account="acct", qos="high", reservation="r", gpus_per_node=8, cpus_per_task=11,
        env_setup=["source /shared/venv/bin/activate"], extra_sbatch=["--exclusive"],
    )  # fmt: skip
    settings = AsyncEvaluationConfig(launcher="slurm", tp=2, dp=8, timeout_s=5400, slurm=slurm)
    job = _job(tmp_path, tmp_path / "checkpoints" / "200", settings, 200)
    assert sbatch_options(job, settings) == [
        "--job-name=eval-tiny-200", f"--output={tmp_path}/logs/200/slurm-%j.out", "--nodes=2",
        "--ntasks-per-node=8", "--gpus-per-node=8", "--cpus-per-task=11", "--time=90", "--partition=eval",
        "--account=acct", "--qos=high", "--reservation=r", "--exclusive",
    ]  # fmt: skip
    script = slurm_script(job, settings)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and lines[1] == "#SBATCH --job-name=eval-tiny-200"
    assert sum(line.startswith("#SBATCH ") for line in lines) == 12
    assert "source /shared/venv/bin/activate" in lines and "export EXAMPLE='a b'" in lines
    assert lines[-1].startswith(f"srun --kill-on-bad-exit=1 {sys.executable} -m lighteval_nanotron eval ")
    assert "eval CHECKPOINT --tp 2 --dp 8 " in lines[-1].replace(str(job.checkpoint), "CHECKPOINT")  # pp 1: the default
    assert "--pp" not in lines[-1] and "--cpu" not in lines[-1]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0

    cpu = AsyncEvaluationConfig(launcher="slurm", cpu=True, dp=2, slurm=SlurmSettings(time="00:10:00"))
    assert sbatch_options(job, cpu)[2:5] == ["--nodes=1", "--ntasks=2", "--time=00:10:00"]


def test_sbatch_lines_hold_any_value_sbatch_can_read(tmp_path):
    """sbatch splits a #SBATCH line at white space and ends it at `#`, and --output is a filename
    pattern: a log folder with a space made every launch an 'Invalid directive' (the real Slurm
    test runs such a folder); values that are not plain are quoted, the folder's `%` doubled."""
    settings = AsyncEvaluationConfig(launcher="slurm", cpu=True, slurm=SlurmSettings(partition="gpu #2", account='a"b'))
    job = dataclasses.replace(_job(tmp_path, tmp_path / "ckpt", settings, 3), logs_dir=Path("/runs/my run %x/3"))
    options = sbatch_options(job, settings)
    assert options[1] == '--output="/runs/my run %%x/3/slurm-%j.out"'
    assert options[-2:] == ['--partition="gpu #2"', '--account="a\\"b"']
    with pytest.raises(ConfigError, match="backslash"):
        sbatch_options(dataclasses.replace(job, logs_dir=Path("/runs/a\\b/3")), settings)
    with pytest.raises(ConfigError, match=r"slurm\.qos 'x\\ny' has a line break"):
        sbatch_options(job, AsyncEvaluationConfig(launcher="slurm", cpu=True, slurm=SlurmSettings(qos="x\ny")))


def test_slurm_template(tmp_path):
    template = tmp_path / "template.sh"
    template.write_text("#!/bin/bash\n${sbatch}\n#SBATCH --comment=step-${step}\nmodule load cuda\n${setup}\n"
                        "echo $SLURM_JOB_ID ${SLURM_JOB_NAME}\n${command}\n")  # fmt: skip
    settings = AsyncEvaluationConfig(launcher="slurm", cpu=True, slurm=SlurmSettings(template=str(template)))
    script = slurm_script(_job(tmp_path, tmp_path / "ckpt", settings, 7), settings)
    assert "#SBATCH --comment=step-7" in script and "echo $SLURM_JOB_ID ${SLURM_JOB_NAME}" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    template.write_text("#!/bin/bash\n${sbatch}\n${comand}\n")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \['comand'\]"):
        read_template(str(template))
    template.write_text("#!/bin/bash\n${sbatch}\n")
    with pytest.raises(ConfigError, match="has no"):
        read_template(str(template))
    template.write_text("#!/bin/bash\n#SBATCH --time=10\n${setup}\n${command}\n")  # its own #SBATCH lines only
    with pytest.raises(ConfigError, match=r"no \$\{sbatch\}"):
        read_template(str(template))
    template.write_text("#!/bin/bash\n${sbatch}\nsource venv/bin/activate\n${command}\n")
    with pytest.raises(ConfigError, match=r"no \$\{setup\}"):
        read_template(str(template))


def _step_checkpoints(tmp_path: Path, checkpoint: Path, *steps: int) -> dict[int, Path]:
    """Copies of a (step-less, converted) checkpoint as a training's step folders."""
    for step in steps:
        shutil.copytree(checkpoint, tmp_path / "run" / str(step))
    return {step: tmp_path / "run" / str(step) for step in steps}


def _results(tmp_path: Path) -> dict:
    return results_files_by_step(tmp_path / "out", "tiny")


def _has_results(tmp_path: Path):
    return lambda step: step in _results(tmp_path)


def test_local_launcher_done_and_timed_out(tiny_converted, tmp_path):
    checkpoints = _step_checkpoints(tmp_path, tiny_converted[1], 1, 2)
    outcomes = []
    settings = AsyncEvaluationConfig(launcher="local", cpu=True, timeout_s=300, status_interval_s=0.2)
    queue = LaunchQueue(LocalLauncher(settings), 1, 0.2, _has_results(tmp_path), outcomes.append)
    script_check = local_script(_job(tmp_path, checkpoints[1], settings, 1), settings)
    assert script_check.splitlines()[-1].startswith("exec timeout --kill-after=30 300s ")
    queue.add(_job(tmp_path, checkpoints[1], settings, 1))
    queue.add(_job(tmp_path, checkpoints[1], settings, 1))  # the same step once
    queue.pump()
    assert [record.step for record in queue.in_flight] == [1] and not queue.pending
    queue.wait_all(poll_s=0.2)
    assert [(record.step, record.ok) for record in outcomes] == [(1, True)], outcomes
    assert sorted(_results(tmp_path)) == [1]

    quick = AsyncEvaluationConfig(launcher="local", cpu=True, timeout_s=1, status_interval_s=0.2)
    queue = LaunchQueue(LocalLauncher(quick), 1, 0.2, _has_results(tmp_path), outcomes.append)
    queue.add(_job(tmp_path, checkpoints[2], quick, 2))
    queue.wait_all(poll_s=0.2)
    assert (outcomes[1].step, outcomes[1].ok) == (2, False)
    assert outcomes[1].detail.startswith("timed out (exit status 124)"), outcomes[1].detail
    assert sorted(_results(tmp_path)) == [1]
    assert (tmp_path / "logs" / "2" / "eval.log").exists()


def test_slurm_launcher_against_a_real_slurm(tiny_converted, tmp_path):
    missing = missing_binaries()
    if missing:
        pytest.skip(SLURM_MISSING.format(missing=", ".join(missing)))
    checkpoints = _step_checkpoints(tmp_path, tiny_converted[1], 1, 2)
    with slurm_cluster(tmp_path / "slurm") as env:
        settings = AsyncEvaluationConfig(launcher="slurm", cpu=True, slurm=SlurmSettings(time="00:05:00"))
        outcomes = []
        queue = LaunchQueue(SlurmLauncher(settings), 2, 0.2, _has_results(tmp_path), outcomes.append)
        logs = tmp_path / "logs #1 %x"  # sbatch reads a space and `#` in a #SBATCH line its own way
        done_job = dataclasses.replace(_job(tmp_path, checkpoints[1], settings, 1), logs_dir=logs / "1")
        cancelled_job = _job(tmp_path, checkpoints[2], settings, 2)
        for job in (done_job, cancelled_job):
            job.base_env.update(SLURM_CONF=env["SLURM_CONF"])
            queue.add(job)
        queue.pump()
        (first, _), (second, _) = queue.running
        subprocess.run(["scancel", second.job_id], env=env, check=True, timeout=30)
        assert wait_for_job(first.job_id, env, timeout=240) == "COMPLETED", list((logs / "1").glob("*"))
        assert wait_for_job(second.job_id, env, timeout=60) == "CANCELLED"
        queue.pump(force_poll=True)
        assert slurm_job_state("999999", env) == (None, None)  # a job the controller no longer knows
    # The controller unreachable (stopped with the cluster; retries cut to 1 s) is not a forgotten job
    dead = tmp_path / "dead.conf"
    dead.write_text(Path(env["SLURM_CONF"]).read_text() + "MessageTimeout=1\n")
    with pytest.raises(OSError, match="Unable to contact slurm controller"):
        slurm_job_state(first.job_id, {**env, "SLURM_CONF": str(dead)})
    assert [(record.step, record.ok) for record in outcomes] == [(1, True), (2, False)], outcomes
    assert "Slurm state CANCELLED" in outcomes[1].detail
    assert sorted(_results(tmp_path)) == [1]
    log = (logs / "1" / f"slurm-{first.job_id}.out").read_text()
    assert "Evaluation of tiny at step 1" in log


@pytest.mark.distributed  # the local launcher runs its job as a process
def test_a_failed_local_evaluation_is_recorded_with_its_error_line(tmp_path):
    """The training log says why a launched `eval` failed (its `error:` line), not only where its log is."""
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\necho 'loading...'\n"
        'echo "error: Step 2 of tiny in out: the step\'s results file holds arc scored with other settings" >&2\n'
        "echo 'a last line'\nexit 2\n"
    )
    python.chmod(0o755)
    settings = AsyncEvaluationConfig(launcher="local", cpu=True, timeout_s=60, status_interval_s=0.1)
    job = dataclasses.replace(_job(tmp_path, tmp_path / "run" / "2", settings, 2), python=str(python))
    outcomes = []
    queue = LaunchQueue(LocalLauncher(settings), 1, 0.1, lambda step: False, outcomes.append)
    assert launch_history(job) is None
    queue.add(job)
    assert launch_history(job) == "queued"  # what a training that dies now leaves for its resumed run
    queue.wait_all(poll_s=0.1)
    assert launch_history(job) == "launched"
    # A launch whose script cannot be written (a full or read-only disk) is recorded and gives its
    # slot back: the slot was kept, and every later launch failed with 'pop from an empty deque'.
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    queue.add(dataclasses.replace(job, step=3, scripts_dir=blocked / "3"))
    queue.add(dataclasses.replace(job, step=4))
    queue.wait_all(poll_s=0.1)
    assert [(record.step, record.where) for record in outcomes[1:]] == [(3, "not launched"), (4, outcomes[2].where)]
    assert "NotADirectoryError" in outcomes[1].detail and outcomes[2].where.startswith("pid ")
    (record, *_) = outcomes
    assert not record.ok
    assert record.detail == (
        f"exit status 2 (log: {tmp_path / 'logs' / '2' / 'eval.log'}): error: Step 2 of tiny in out: the step's "
        "results file holds arc scored with other settings"
    ), record.detail


def test_a_slow_slurm_controller_never_holds_up_the_training_step(tmp_path):
    """sbatch and scontrol answer in seconds from a busy controller (up to COMMAND_TIMEOUT_S each): the
    training's step ran them itself and waited. They now run on a worker thread; an output folder that
    cannot be read records the evaluation as failed instead of raising into the training step."""
    path = _fake_commands(
        tmp_path, {"sbatch": "sleep 1\necho 41", "scontrol": "sleep 1\necho JobId=41 JobState=COMPLETED ExitCode=0:0"}
    )
    settings = AsyncEvaluationConfig(launcher="slurm", cpu=True, status_interval_s=0.1)
    job = _with_env(_job(tmp_path, tmp_path / "run" / "5", settings, 5), path)

    def unreadable(step: int) -> bool:
        raise PermissionError(f"{tmp_path / 'out'} cannot be listed")

    outcomes = []
    queue = LaunchQueue(SlurmLauncher(settings), 1, 0.1, unreadable, outcomes.append)
    queue.add(job)
    started = time.monotonic()
    queue.pump_in_background()  # sbatch runs for a second, on the worker
    queue.pump_in_background()  # a round is under way: nothing more to start
    assert time.monotonic() - started < 0.5
    queue.wait_all(poll_s=0.1)  # the end of training waits, as before
    (record,) = outcomes
    assert (record.step, record.where, record.ok) == (5, "Slurm job 41", False)
    said = f"Slurm state COMPLETED, exit code 0:0 (log: {job.logs_dir}/slurm-41.out), but its results cannot be read"
    assert record.detail.startswith(said), record.detail


@pytest.mark.parametrize(
    ("state", "over"),
    [("STAGE_OUT", False), ("STOPPED", False), ("REQUEUE_HOLD", False), ("SPECIAL_EXIT", False), ("PENDING", False),
     ("PREEMPTED", True), ("OUT_OF_MEMORY", True), ("COMPLETED", True)],
)  # fmt: skip
def test_a_slurm_job_held_stopped_or_staging_out_is_still_in_flight(tmp_path, state, over):
    """Such a job was taken as ended: recorded as failed, its slot given to the next job (over
    max_in_flight) while it was still to run or finishing."""
    path = _fake_commands(tmp_path, {"scontrol": f"echo JobId=41 JobState={state} ExitCode=0:0"})
    settings = AsyncEvaluationConfig(launcher="slurm", cpu=True)
    job = _with_env(_job(tmp_path, tmp_path / "run" / "5", settings, 5), path)
    assert (SlurmLaunch(job, "41").poll() is not None) == over


def test_a_job_sbatch_queued_without_answering_in_time_is_followed(tmp_path):
    """sbatch timing out does not mean the controller did not queue the job: such a job was recorded as
    never launched while it ran (its slot given to the next job); it is found by its name."""
    path = _fake_commands(
        tmp_path, {"sbatch": "exec sleep 5", "squeue": 'case "$*" in *--name=eval-tiny-5*) echo 77;; esac'}
    )
    settings = AsyncEvaluationConfig(launcher="slurm", cpu=True)
    launcher = SlurmLauncher(settings)
    launcher.command_timeout_s = 0.5
    job = _job(tmp_path, tmp_path / "run" / "5", settings, 5)
    assert launcher.launch(_with_env(job, path)).job_id == "77"
    other = _job(tmp_path, tmp_path / "run" / "6", settings, 6)
    with pytest.raises(OSError, match="within 0.5s .*squeue .*eval-tiny-6"):
        launcher.launch(_with_env(other, path))
