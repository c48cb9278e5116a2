"""Nanotron's own `lighteval:` section is honoured (mapped onto ours, logged), or refused next to ours."""

import json

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
    assert "parallelism.tp (the hook evaluates on the training mesh)" in caplog.text
    assert "batch_size (batches are sized by a token budget" in caplog.text


@pytest.mark.distributed
def test_training_with_nanotron_section_evaluates(tmp_path):
    config = _with_nanotron_section(tmp_path, keep_ours=False)
    (report,) = run_distributed(train_worker, 1, str(config), timeout=240)
    assert report["failures"] == []
    (results_file,) = (tmp_path / "eval" / "results").rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    assert set(results) == {CAPITALS, "all"}
    assert set(results[CAPITALS]) == {"acc", "acc_stderr", "acc_centered", "acc_centered_stderr"}


def test_nanotron_main_fields_map_onto_the_hook():
    from lighteval_nanotron.hook.nanotron_lighteval_section import evaluation_from_nanotron_section

    section = {"tasks": {"tasks": CAPITALS}, "eval_interval": 10, "upload_to_wandb": True, "wandb_project": "p",
               "logging": {"push_results_to_tensorboard": True, "tensorboard_metric_prefix": "lighteval"}}  # fmt: skip
    config = evaluation_from_nanotron_section(section)
    assert (config.eval_interval, config.eval_at_checkpoints, config.eval_at_end) == (10, False, True)
    assert config.loggers == ["json", "details", "tensorboard", "wandb", "log"]
    assert (config.wandb_project, config.tensorboard_prefix) == ("p", "lighteval")


def test_hub_pushes_are_refused_before_training():
    from lighteval_nanotron.hook.nanotron_lighteval_section import evaluation_from_nanotron_section

    with pytest.raises(ConfigError, match="logging.push_results_to_hub=True cannot be honoured"):
        evaluation_from_nanotron_section({"tasks": {"tasks": CAPITALS}, "logging": {"push_results_to_hub": True}})


def test_nanotron_sampler_maps_onto_the_hook_generation():
    import dataclasses

    from lighteval_nanotron.hook.config import EvaluationConfig
    from lighteval_nanotron.hook.nanotron_lighteval_section import evaluation_from_nanotron_section

    if "generation" not in {f.name for f in dataclasses.fields(EvaluationConfig)}:
        pytest.skip("sampling generation is not in this tree (it comes with the generation settings)")
    section = {"tasks": {"tasks": CAPITALS}, "generation": {"sampler": "top_p", "top_p": 0.8, "seed": 5}}
    assert evaluation_from_nanotron_section(section).generation == {"temperature": 1.0, "top_p": 0.8, "seed": 5}
