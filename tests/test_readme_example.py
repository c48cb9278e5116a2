"""The README's Python example runs as written: its code block, taken from README.md, in a fresh
process whose working folder holds what the example names (the checkpoint `make demo` saves, here
the tiny Llama checkpoint; the demo's tokenizer folder), offline."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.tiny_model import tiny_checkpoint  # noqa: F401  (pytest fixture)

REPO = Path(__file__).resolve().parents[1]


def readme_python_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)
    (example,) = [block for block in blocks if "evaluate(" in block]
    return example


def test_the_readme_python_example_runs_as_written(tiny_checkpoint, tmp_path):  # noqa: F811
    example = readme_python_example()
    checkpoint = re.search(r'load_nanotron_checkpoint\("([^"]+)"', example).group(1)
    tokenizer = re.search(r'AutoTokenizer.from_pretrained\("([^"]+)"\)', example).group(1)
    (tmp_path / checkpoint).parent.mkdir(parents=True)
    (tmp_path / checkpoint).symlink_to(tiny_checkpoint)
    (tmp_path / tokenizer).parent.mkdir(parents=True)
    (tmp_path / tokenizer).symlink_to(REPO / tokenizer)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("RANK", None)  # a plain `python script.py`: no launcher variables
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tasks = re.search(r'tasks="([^"]+)"', example).group(1).split(",")
    printed = done.stdout.splitlines()
    assert all(any(line.startswith(f"| {task} ") for line in printed) for task in tasks), done.stdout
    (results,) = (tmp_path / "eval_results" / "results").rglob("results_*.json")
    content = json.loads(results.read_text())
    assert sorted(t for t in content["results"] if t != "all") == sorted(tasks)
    assert content["config_general"]["training_step"] == int(re.search(r"step=(\d+)", example).group(1))
    assert all(0.0 <= content["results"][task]["acc"] <= 1.0 for task in tasks)
