"""`eval --checkpoint-config-path ... --lighteval-config-path eval.yaml`, as `lighteval nanotron` is
called: the same results as the equivalent flags; what cannot be honoured is one `error:` line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lighteval_nanotron.errors import ConfigError
from lighteval_nanotron.lighteval_compat.eval_config import eval_config
from lighteval_nanotron.parallel.distributed import free_loopback_port
from tests.checkpoint_eval.details_check import read_details
from tests.checkpoint_eval.test_eval_cli import REPO, _env

CUSTOM_TASKS = str(Path(__file__).parent / "capitals_tasks.py")
TASKS = "custom|capitals|0,lighteval|arc:easy|0"


def _lighteval_yaml(folder: Path, **changes) -> Path:
    """An eval YAML as lighteval 0.10 documents it (examples/nanotron), at TP2."""
    content = {
        "batch_size": 8,
        "generation": None,
        "logging": {
            "output_dir": str(folder / "from_yaml"),
            "save_details": True,
            "push_to_hub": False,
            "public_run": False,
            "results_org": None,
            "tensorboard_metric_prefix": "eval",
        },
        "parallelism": {"dp": 1, "pp": 1, "tp": 2, "pp_engine": "1f1b", "tp_linear_async_communication": False,
                        "tp_mode": "ALL_REDUCE"},
        "tasks": {"dataset_loading_processes": 8, "max_samples": 4, "multichoice_continuations_start_space": None,
                  "num_fewshot_seeds": None, "tasks": TASKS, "custom_tasks": CUSTOM_TASKS},
    }  # fmt: skip
    for section, values in changes.items():
        content[section].update(values)
    path = folder / "eval.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def _eval(*argv: str, nproc: int = 1) -> subprocess.CompletedProcess:
    launcher = ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
                "--master-port", str(free_loopback_port())] if nproc > 1 else []  # fmt: skip
    command = [sys.executable, *launcher, "-m", "lighteval_nanotron", "eval", "--cpu", "--data-dir", "bundled", *argv]
    return subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)


def _results(output_dir: Path) -> dict:
    (results_file,) = (output_dir / "results").rglob("results_*.json")
    return json.loads(results_file.read_text())


def test_lighteval_yaml_gives_the_results_of_the_equivalent_flags(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    config = _lighteval_yaml(tmp_path)
    done = _eval("--checkpoint-config-path", str(checkpoint / "config.yaml"), "--lighteval-config-path", str(config),
                 nproc=2)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "No effect here: batch_size (batches are sized by a token budget" in done.stderr
    flags = _eval(str(checkpoint), "--tp", "2", "--tasks", TASKS, "--custom-tasks", CUSTOM_TASKS, "--max-samples", "4",
                  "--output-dir", str(tmp_path / "from_flags"), "--loggers", "json", "details", nproc=2)  # fmt: skip
    assert flags.returncode == 0, flags.stderr[-3000:]
    from_yaml, from_flags = _results(tmp_path / "from_yaml"), _results(tmp_path / "from_flags")
    assert from_yaml["results"] == from_flags["results"]
    assert set(from_yaml["results"]) == {"custom|capitals|0", "lighteval|arc:easy|0", "all"}
    assert from_yaml["config_general"]["parallelism"] == {"tp": 2, "pp": 1, "dp": 1}
    assert from_yaml["config_general"]["checkpoint"] == str(checkpoint)
    details = [read_details(next((tmp_path / out / "details").rglob("details_*.parquet")).parent)
               for out in ("from_yaml", "from_flags")]  # fmt: skip
    assert details[0] == details[1]
    assert not (tmp_path / "from_yaml" / "tensorboard").exists()  # push_to_tensorboard unset: no TensorBoard


def test_continuations_start_space_from_the_yaml(tiny_converted, tmp_path):
    """lighteval's multichoice_continuations_start_space: false scores each choice without its leading space."""
    from tests.helpers.tiny_model import tiny_tokenizer

    _, checkpoint = tiny_converted
    tasks = {"tasks": "lighteval|arc:easy|0", "multichoice_continuations_start_space": False}
    config = _lighteval_yaml(tmp_path, parallelism={"tp": 1}, tasks=tasks)
    done = _eval("--checkpoint-config-path", str(checkpoint / "config.yaml"), "--lighteval-config-path", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    (rows,) = read_details(next((tmp_path / "from_yaml" / "details").rglob("details_*.parquet")).parent).values()
    tokenizer = tiny_tokenizer()
    assert all(choice.startswith(" ") for row in rows for choice in row["choices"])  # as the task writes them
    for row in rows:
        for choice, continuation in zip(row["choices"], row["cont_tokens"], strict=True):
            assert row["input_tokens"] + continuation == tokenizer(row["full_prompt"] + choice.lstrip())["input_ids"]


def test_a_field_that_cannot_be_honoured_is_one_error_line(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    config = _lighteval_yaml(tmp_path, logging={"push_to_hub": True, "results_org": "me"})
    done = _eval("--checkpoint-config-path", str(checkpoint / "config.yaml"), "--lighteval-config-path", str(config))
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "logging.push_to_hub=True cannot be honoured" in line and "set it to false" in line
    assert "Traceback" not in done.stderr and not (tmp_path / "from_yaml").exists()


def test_flags_fill_what_the_yaml_leaves_out_and_may_not_contradict_it(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    config = str(_lighteval_yaml(tmp_path))
    checkpoint_config = str(checkpoint / "config.yaml")
    merged = eval_config({"dtype": "float32", "model_name": "m"}, checkpoint_config, config)
    assert (merged.checkpoint, merged.tp, merged.max_samples, merged.dtype) == (str(checkpoint), 2, 4, "float32")
    assert (merged.model_name, merged.loggers) == ("m", ["json", "details"])
    with pytest.raises(ConfigError, match="--max-samples and .*tasks.max_samples.*keep one"):
        eval_config({"max_samples": 2}, checkpoint_config, config)
    with pytest.raises(ConfigError, match="--loggers and .*logging.save_details.*keep one"):
        eval_config({"loggers": ["json"]}, checkpoint_config, config)
    without_logging = _lighteval_yaml(tmp_path)
    content = yaml.safe_load(without_logging.read_text())
    content.pop("logging")
    without_logging.write_text(yaml.safe_dump(content))
    assert eval_config({"loggers": ["json"]}, checkpoint_config, str(without_logging)).loggers == ["json"]
    assert eval_config({}, checkpoint_config, str(without_logging)).loggers == ["json", "details"]


@pytest.mark.parametrize(
    "flags, checkpoint_config, words",
    [
        ({}, "missing/config.yaml", "does not exist.*config.yaml"),
        ({}, "model_config.json", "checkpoint's config.yaml"),
        ({"checkpoint": "x"}, "config.yaml", "not both"),
        ({"checkpoints_dir": "x"}, "config.yaml", "Give exactly one of"),
    ],
)
def test_checkpoint_config_path_errors(tiny_converted, flags, checkpoint_config, words):
    _, checkpoint = tiny_converted
    with pytest.raises(ConfigError, match=words):
        eval_config({"tasks": TASKS, **flags}, str(checkpoint / checkpoint_config))


def test_lighteval_yaml_errors(tmp_path):
    (tmp_path / "list.yaml").write_text("- tasks\n")
    (tmp_path / "broken.yaml").write_text("tasks: [\n")
    with pytest.raises(ConfigError, match="expected lighteval's eval YAML"):
        eval_config({}, None, str(tmp_path / "list.yaml"))
    with pytest.raises(ConfigError, match="is not valid YAML"):
        eval_config({}, None, str(tmp_path / "broken.yaml"))
    with pytest.raises(ConfigError, match="cannot read it"):
        eval_config({}, None, str(tmp_path / "missing.yaml"))
    (tmp_path / "no_tasks.yaml").write_text("logging: {output_dir: out}\n")
    no_tasks = r"No tasks: give --tasks \(or tasks.tasks in the --lighteval-config-path YAML\)"
    with pytest.raises(ConfigError, match=no_tasks):
        eval_config({"checkpoint": "x"}, None, str(tmp_path / "no_tasks.yaml"))
    # a value of the YAML that its option refuses: the error names the flag, and the field it was written as
    typed = tmp_path / "typed.yaml"
    typed.write_text("tasks:\n  tasks: lighteval|arc:easy|0\n  max_samples: '5'\n")
    written = rf"^--max-samples is '5': give an integer or null \(set by lighteval config {typed}'s tasks.max_samples\)"
    with pytest.raises(ConfigError, match=written):
        eval_config({"checkpoint": "x"}, None, str(typed))
    typed.write_text("tasks:\n  tasks: lighteval|arc:easy|0\n")
    with pytest.raises(ConfigError, match=r"^--tokens-per-batch is 0: .*8192"):
        eval_config({"checkpoint": "x", "tokens_per_batch": 0}, None, str(typed))  # the flag's own value: no source


def test_lighteval_sampling_fields_give_the_results_of_the_sampling_flags(request, tmp_path):
    import dataclasses

    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig

    if "generation" not in {f.name for f in dataclasses.fields(CheckpointEvalConfig)}:
        pytest.skip("sampling generation is not in this tree (it comes with the generation settings)")
    _, checkpoint = request.getfixturevalue("tiny_converted")
    generative = str(Path(__file__).parent / "capitals_generative_tasks.py")
    task = "custom|capitals_gen|0"
    sampling = {"sampler": "top_k", "temperature": 0.8, "top_k": 20, "n_samples": 2, "seed": 3}
    config = _lighteval_yaml(tmp_path, parallelism={"tp": 1}, tasks={"tasks": task, "custom_tasks": generative})
    content = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**content, "generation": sampling}))
    done = _eval("--checkpoint-config-path", str(checkpoint / "config.yaml"), "--lighteval-config-path", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    common = [str(checkpoint), "--tasks", task, "--custom-tasks", generative, "--loggers", "json", "details"]
    flags = _eval(*common, "--temperature", "0.8", "--top-k", "20", "--num-samples", "2", "--seed", "3",
                  "--output-dir", str(tmp_path / "from_flags"))  # fmt: skip
    assert flags.returncode == 0, flags.stderr[-3000:]
    # the sampling flags' results: the YAML's sampler was applied (that sampling differs from greedy is tested there)
    assert _results(tmp_path / "from_yaml")["results"] == _results(tmp_path / "from_flags")["results"]
    yaml_details, flags_details = [read_details(next((tmp_path / out / "details").rglob("details_*.parquet")).parent)
                                   for out in ("from_yaml", "from_flags")]  # fmt: skip
    assert yaml_details == flags_details and len(yaml_details[task]) == 4
