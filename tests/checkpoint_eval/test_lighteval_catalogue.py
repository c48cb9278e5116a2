"""lighteval's catalogue of the installed version: tasks we have no built-in for resolve to lighteval's own
definitions (same docs and prompts), run on local data, and `tasks list --suites all` lists the catalogue."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lighteval_nanotron.tasks.data_dirs import BUNDLED_ROOT
from tests.checkpoint_eval.test_eval_cli import REPO, _env

# None of these is a built-in here; their datasets are in the bundled slices (winogrande through a
# HF_REPO=PATH data dir). lighteval 0.12+ names tasks without a suite: they are `lighteval|<name>` here,
# and a suite that has no such task is ignored with a warning, as lighteval 0.13 does (the last spec).
SUITELESS = {
    "specs": [
        "lighteval|mmlu:abstract_algebra|0",
        "lighteval|mmlu:anatomy|0",
        "lighteval|siqa|0",
        "lighteval|winogrande|0",
        "helm|mmlu:astronomy|0",
    ],
    "results": [
        "lighteval|mmlu:abstract_algebra|0",
        "lighteval|mmlu:anatomy|0",
        "lighteval|siqa|0",
        "lighteval|winogrande|0",
        "lighteval|mmlu:astronomy|0",
    ],
    "data_dirs": ["bundled", f"allenai/winogrande={BUNDLED_ROOT / 'winogrande'}"],
    "groups": ["lighteval|mmlu:_average|0"],  # lighteval's group average of the MMLU subjects
}
SUITED = {  # lighteval 0.11
    "specs": [
        "original|arc:c:options|0",
        "original|arc:c:simple|0",
        "helm|mmlu:abstract_algebra|0",
        "helm|mmlu:astronomy|0",
        "helm|mmlu:anatomy|0",
    ],
    "data_dirs": ["bundled"],
    "groups": ["original|arc:_average|0", "helm|mmlu:_average|0"],
}


def _installed():
    pytest.importorskip("lighteval", reason="lighteval is not installed: pip install -e '.[lighteval]'")
    from lighteval_nanotron.tasks.lighteval_adapter import import_lighteval

    return import_lighteval()


def _per_file(lighteval) -> bool:
    """lighteval 0.12+ keeps one module per task family (0.11: `default_tasks`)."""
    return (Path(lighteval.lighteval_task.__file__).parent / "tasks").is_dir()


def _case(lighteval) -> dict:
    case = dict(SUITELESS if _per_file(lighteval) else SUITED)
    if _per_file(lighteval) and not lighteval.suiteless:  # 0.12.0: tasks named lighteval|..., suites not ignored
        case["specs"], case["results"] = case["specs"][:-1], case["results"][:-1]
    case.setdefault("results", case["specs"])
    return case


def _lighteval_configs(lighteval) -> dict:
    """lighteval's own task configs by key here, found as lighteval's registry finds them (its task
    modules, each `*.py` and each folder with a `main.py`; those that fail to import here left out)."""
    if not _per_file(lighteval):
        module = importlib.import_module("lighteval.tasks.default_tasks")
        configs = [v for v in vars(module).values() if type(v).__name__ == "LightevalTaskConfig"]
        return {f"{suite}|{config.name}": config for config in configs for suite in config.suite}
    from lighteval.tasks.registry import Registry as LightevalRegistry

    folder = Path(lighteval.lighteval_task.__file__).parent / "tasks"
    names = [f"lighteval.tasks.tasks.{p.stem}" for p in folder.glob("*.py") if p.name != "__init__.py"]
    names += [f"lighteval.tasks.tasks.{p.name}.main" for p in folder.iterdir() if (p / "main.py").is_file()]
    found = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for key, config in LightevalRegistry._extract_configs(module).items():
            found[key if "|" in key else f"lighteval|{key}"] = config  # 0.12.0's keys have their suite
    return found


def test_catalogue_tasks_have_lightevals_docs_and_prompts(monkeypatch):
    """The docs of each catalogue task equal those lighteval's own `LightevalTask` builds from the same rows."""
    lighteval = _installed()
    from lighteval_nanotron.tasks import Registry, set_data_dirs

    case = _case(lighteval)
    monkeypatch.setattr("lighteval_nanotron.tasks.data_dirs._data_dirs", None)
    set_data_dirs(case["data_dirs"])
    assert not set(Registry.create_task_config_dict()) & {key.rsplit("|", 1)[0] for key in case["results"]}
    theirs_by_key = _lighteval_configs(lighteval)
    ours = Registry(",".join(case["specs"])).load_tasks()
    assert list(ours) == case["results"]
    for full_name, task in ours.items():
        theirs = lighteval.lighteval_task.LightevalTask(theirs_by_key[full_name.rsplit("|", 1)[0]])
        theirs.dataset = task.download_dataset_worker(task)  # the same rows, read by this project's data layer
        our_docs, their_docs = task.eval_docs(), theirs.eval_docs()
        assert len(our_docs) == len(their_docs) > 0
        for mine, other in zip(our_docs, their_docs):
            assert (mine.query, list(mine.choices), mine.gold_index, mine.instruction or None) == (
                other.query,
                list(other.choices),
                other.gold_index,
                other.instruction or None,
            )
        assert [m.metric_name for m in task.metrics] == [m.metric_name for m in theirs.metrics]


def test_catalogue_tasks_evaluate_on_local_data(tiny_converted, tmp_path):
    lighteval = _installed()
    case = _case(lighteval)
    _, checkpoint = tiny_converted
    data_dirs = [arg for entry in case["data_dirs"] for arg in ("--data-dir", entry)]
    command = [
        sys.executable, "-m", "lighteval_nanotron", "eval", str(checkpoint), "--cpu",
        "--tasks", ",".join(case["specs"]), "--max-samples", "2", *data_dirs,
        "--output-dir", str(tmp_path), "--dtype", "float32",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = (tmp_path / "results").rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    # the tasks, lighteval's group averages of each family, `all` (as lighteval writes them)
    assert set(results) == {*case["results"], *case["groups"], "all"}
    for task in case["results"]:
        # centered metrics, (v - chance) / (1 - chance), fall below 0 under chance
        values = [value for key, value in results[task].items() if not key.endswith(("_stderr", "_centered"))]
        assert values and all(0 <= value <= 1 for value in values), (task, results[task])
    if lighteval.suiteless:
        assert "suite 'helm' has no task 'mmlu:astronomy'" in done.stderr
    assert "[nltk_data]" not in done.stdout + done.stderr  # lighteval's offline nltk downloads, quiet


def test_catalogue_loads_without_nltk_download_noise(tmp_path):
    """lighteval's modules call nltk.download when imported; offline (CI, this machine) each failure
    printed four lines before the answer. Quiet by default, shown with --verbose."""
    _installed()
    env = {**_env(), "NLTK_DATA": str(tmp_path / "nltk_data"), "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "lighteval_nanotron", "tasks", "inspect", "lighteval|arcc:easy|0"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    printed = (done.stdout + done.stderr).strip().splitlines()
    assert len(printed) == 1 and printed[0].startswith("error: Unknown task 'lighteval|arcc:easy'"), printed


def test_tasks_list_all_shows_the_installed_catalogue(capsys):
    lighteval = _installed()
    from lighteval_nanotron.cli.main import main

    assert main(["tasks", "list", "--suites", "all"]) == 0
    listed = capsys.readouterr().out
    items = [line[4:] for line in listed.splitlines() if line.startswith("  - ")]
    lines = {item.split("  (cannot run here", 1)[0] for item in items}
    expected = set(_lighteval_configs(lighteval))
    assert expected and expected <= lines, sorted(expected - lines)[:10]
    assert f"lighteval {lighteval.version}'s catalogue:" in listed
    if lighteval.suiteless:
        assert "- multilingual:" in listed and sum(key.startswith("multilingual|") for key in lines) > 100
