"""SLURM's variables mapped onto torchrun's (a plain `srun`, no torchrun), as pure functions."""

import pytest

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.parallel.launch_env import apply_launcher_env, first_host, tasks_on_node, torch_env_from_slurm

SRUN_TASK = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_JOB_ID": "123456",
    "SLURM_JOB_NODELIST": "gpu-[017-018]",
    "SLURM_TASKS_PER_NODE": "4(x2)",
}


def test_an_srun_task_gets_torchruns_variables():
    assert torch_env_from_slurm(SRUN_TASK) == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "gpu-017",
        "MASTER_PORT": str(20000 + 123456 % 20000),
    }


def test_the_step_wins_over_the_job_and_exported_variables_win_over_both():
    environ = {**SRUN_TASK, "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "cpu7,gpu-017"}
    environ.update(MASTER_ADDR="10.0.0.1", MASTER_PORT="29500")
    mapped = torch_env_from_slurm(environ)
    assert mapped["WORLD_SIZE"] == "4"
    assert "MASTER_ADDR" not in mapped and "MASTER_PORT" not in mapped


def test_nothing_is_mapped_under_torchrun_or_outside_slurm():
    assert torch_env_from_slurm({**SRUN_TASK, "RANK": "0"}) == {}
    assert torch_env_from_slurm({"SLURM_JOB_ID": "1"}) == {}
    environ = dict(SRUN_TASK)
    assert apply_launcher_env(environ)["RANK"] == "5"
    assert environ["RANK"] == "5" and apply_launcher_env(environ) == {}


@pytest.mark.parametrize(
    "nodelist, host",
    [("node1", "node1"), ("gpu[003-005,9],cpu1", "gpu003"), ("a[7],b[1-2]", "a7"), ("n-[01-02]", "n-01")],
)
def test_first_host_of_a_node_list(nodelist, host):
    assert first_host(nodelist) == host


def test_tasks_per_node_forms():
    assert [tasks_on_node("4(x2),3", node) for node in range(3)] == [4, 4, 3]
    with pytest.raises(ConfigError, match="outside"):
        tasks_on_node("2", 1)
    with pytest.raises(ConfigError, match="LOCAL_WORLD_SIZE"):
        tasks_on_node("two", 0)


def test_missing_task_count_is_a_clear_error():
    with pytest.raises(ConfigError, match="srun --ntasks"):
        torch_env_from_slurm({"SLURM_PROCID": "0"})
