"""Nanotron's own `lighteval:` section is honoured (mapped onto ours, logged), or refused next to ours."""

import json
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from tests.helpers.distributed import run_distributed
from tests.hook.training_runs import REPO, train_worker, write_config

CAPITALS = "custom|capitals|0"
CAPITALS_TASKS = str(REPO / "tests" / "checkpoint_eval" / "capitals_tasks.py")  # its data lies next to it


def _nanotron_section(folder) -> dict:
    return {
        "batch_size": 16,
        "parallelism": {"dp": 1, "pp": 1, "tp": 1},
        "tasks": {"tasks": CAPITALS, "custom_tasks": CAPITALS_TASKS, "max_samples": 2},
        "logging": {"local_output_path": str(folder / "eval")},
    }


def _with_nanotron_section(folder, keep_ours: bool):
    path = write_config(folder, train_steps=2, section={"data_dirs": ["bundled"]}, evaluate=keep_ours)
    content = yaml.safe_load(path.read_text())
    content["lighteval"] = _nanotron_section(folder)
    path.write_text(yaml.safe_dump(content))
    return path


def test_both_sections_are_refused(tmp_path):
    from lighteval_nanotron.hook.training_config import load_training_config

    with pytest.raises(ConfigError, match="both a lighteval: section.*keep one"):
        load_training_config(str(_with_nanotron_section(tmp_path, keep_ours=True)))


def test_nanotron_section_is_mapped_and_logged(tmp_path, caplog):
    from lighteval_nanotron.hook.training_config import load_training_config

    with caplog.at_level("WARNING"):
        config = load_training_config(str(_with_nanotron_section(tmp_path, keep_ours=False)))
    section = config.lighteval_nanotron
    assert (section.tasks, section.custom_tasks, section.max_samples) == ([CAPITALS], CAPITALS_TASKS, 2)
    assert section.output_dir == str(tmp_path / "eval")
    assert section.eval_at_checkpoints and section.eval_at_end and config.lighteval is None
    assert section.loggers == ["json", "details", "log"]  # lighteval's defaults: details on, TensorBoard off
    assert "parallelism.tp (the hook evaluates on the training mesh, in the loop" in caplog.text
    assert "batch_size (batches are sized by a token budget" in caplog.text


def test_training_with_nanotron_section_evaluates(tmp_path):
    config = _with_nanotron_section(tmp_path, keep_ours=False)
    (report,) = run_distributed(train_worker, 1, str(config), timeout=240)
    assert report["failures"] == []
    (results_file,) = (tmp_path / "eval" / "results").rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    assert set(results) == {CAPITALS, "all"}
    assert set(results[CAPITALS]) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}


def test_nanotron_main_fields_map_onto_the_hook():
    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section

    section = {"tasks": {"tasks": CAPITALS}, "eval_interval": 10, "upload_to_wandb": True, "wandb_project": "p",
               "logging": {"push_results_to_tensorboard": True, "tensorboard_metric_prefix": "lighteval"}}  # fmt: skip
    config = evaluation_from_nanotron_section(section)
    assert (config.eval_interval, config.eval_at_checkpoints, config.eval_at_end) == (10, False, True)
    assert config.loggers == ["json", "details", "tensorboard", "wandb", "log"]
    assert (config.wandb_project, config.tensorboard_prefix) == ("p", "lighteval")


def test_hub_pushes_are_refused_before_training():
    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section

    with pytest.raises(ConfigError, match="logging.push_results_to_hub=True"):
        evaluation_from_nanotron_section({"tasks": {"tasks": CAPITALS}, "logging": {"push_results_to_hub": True}})


def test_nanotron_sampler_maps_onto_the_hook_generation():
    import dataclasses

    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section
    from lighteval_nanotron.options.hook import EvaluationConfig

    if "generation" not in {f.name for f in dataclasses.fields(EvaluationConfig)}:
        pytest.skip("sampling generation is not in this tree (it comes with the generation settings)")
    section = {"tasks": {"tasks": CAPITALS}, "generation": {"sampler": "top_p", "top_p": 0.8, "seed": 5}}
    assert evaluation_from_nanotron_section(section).generation == {"temperature": 1.0, "top_p": 0.8, "seed": 5}


NANOTRON_MAIN_DEFAULTS = {  # what current Nanotron's parser fills in when the YAML has no slurm: section
    "slurm": {"gpus_per_node": 8, "partition": "hopper-prod", "cpus_per_task": 88, "qos": "low", "time": "24:00:00",
              "reservation": "smollm", "hf_cache": str(Path("~/.cache/huggingface").expanduser())},
    "slurm_script_dir": "eval_results/launch-config",
    "logs_path": "eval_results/logs",
    "parallelism": {"dp": 1, "pp": 1, "tp": 1},
}  # fmt: skip


def test_nanotron_section_without_slurm_settings_evaluates_in_the_loop():
    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section

    config = evaluation_from_nanotron_section({**NANOTRON_MAIN_DEFAULTS, "tasks": {"tasks": CAPITALS}})
    assert config.asynchronous is None and config.eval_at_checkpoints
    with pytest.raises(ConfigError, match="eval_interval_file .*Slurm runner"):
        evaluation_from_nanotron_section({"tasks": {"tasks": CAPITALS}, "eval_interval_file": "interval.txt"})


def test_nanotron_slurm_settings_become_slurm_jobs(tmp_path):
    from lighteval_nanotron.launch.job import build_job
    from lighteval_nanotron.launch.script import slurm_script
    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section

    section = {
        **NANOTRON_MAIN_DEFAULTS,
        "slurm": {**NANOTRON_MAIN_DEFAULTS["slurm"], "partition": "eval", "gpus_per_node": 4, "cpus_per_task": 32},
        "parallelism": {"tp": 2, "pp": 1, "dp": 4},
        "logs_path": str(tmp_path / "logs"),
        "tasks": {"tasks": CAPITALS},
        "eval_interval": 20,
        "eval_interval_file": str(tmp_path / "interval.txt"),
        "upload_to_wandb": True,
        "wandb_project": "p",
    }
    config = evaluation_from_nanotron_section(section)
    jobs = config.asynchronous
    assert (jobs.launcher, jobs.tp, jobs.pp, jobs.dp, jobs.cpu) == ("slurm", 2, 1, 4, False)
    assert (config.eval_interval, config.eval_interval_file) == (20, str(tmp_path / "interval.txt"))
    assert (config.eval_at_checkpoints, config.eval_at_end, "wandb" in config.loggers) == (False, True, True)
    assert (jobs.scripts_dir, jobs.logs_dir) == ("eval_results/launch-config", str(tmp_path / "logs"))
    slurm = jobs.slurm
    # Hugging Face's cluster defaults (qos low, reservation smollm) are left to the cluster; 32 CPUs per node
    # over the node's 4 tasks (one per GPU here, one torchrun per node in Nanotron's runner).
    assert (slurm.partition, slurm.gpus_per_node, slurm.cpus_per_task, slurm.time) == ("eval", 4, 8, "24:00:00")
    assert (slurm.qos, slurm.reservation, slurm.hf_cache) == (None, None, None)

    job = build_job(config, jobs, 40, tmp_path / "checkpoints" / "40", "run", None)
    script = slurm_script(job, jobs)
    sbatch = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert sbatch[2:6] == ["#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --gpus-per-node=4",
                           "#SBATCH --cpus-per-task=8"]  # fmt: skip
    assert "#SBATCH --partition=eval" in sbatch and not any("qos" in line for line in sbatch)
    assert "--tp 2 --dp 4 " in script and "--pp" not in script and "--loggers json details wandb" in script


def test_nanotron_slurm_fields_through_the_training_config(tmp_path):
    """0.4's LightEvalConfig has `slurm_template`, current Nanotron's a `slurm:` section: either asks for jobs."""
    from lighteval_nanotron.hook.training_config import load_training_config
    from tests.helpers.nanotron_versions import ON_MAIN

    template = tmp_path / "eval.slurm"
    template.write_text("#!/bin/bash\n${sbatch}\n#SBATCH --exclusive\n${setup}\n${command}\n")
    path = _with_nanotron_section(tmp_path, keep_ours=False)
    content = yaml.safe_load(path.read_text())
    content["lighteval"].update({"slurm": {"partition": "eval"}} if ON_MAIN else {"slurm_template": str(template)})
    content["checkpoints"]["checkpoint_interval"] = 1
    path.write_text(yaml.safe_dump(content))
    section = load_training_config(str(path)).lighteval_nanotron
    jobs = section.asynchronous
    assert jobs.launcher == "slurm" and (jobs.slurm.partition if ON_MAIN else jobs.slurm.template) == (
        "eval" if ON_MAIN else str(template)
    )
    assert section.eval_at_checkpoints and section.loggers == ["json", "details", "log"]

    content["lighteval"]["parallelism"]["tp"] = 0  # was taken as 1
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(ConfigError, match=r"lighteval: section: parallelism\.tp is 0"):
        load_training_config(str(path))


def test_an_option_error_says_the_field_of_nanotrons_section_it_was_written_as():
    """It named only `lighteval_nanotron.max_samples`, a key the YAML did not have."""
    from lighteval_nanotron.lighteval_compat.nanotron_section import evaluation_from_nanotron_section

    section = {"tasks": {"tasks": "lighteval|arc:easy|0", "max_samples": 0}}
    words = r"^lighteval_nanotron\.max_samples is 0: .*lighteval: section's tasks\.max_samples"
    with pytest.raises(ConfigError, match=words):
        evaluation_from_nanotron_section(section)
