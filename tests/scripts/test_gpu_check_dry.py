"""The device check's dry run: exactly the command the GPU machine runs (scripts/gpu_check.sh: the
carried wheels installed with `pip install --no-index` into a folder of their own, then
scripts/gpu_check.py), with --dry (CPU/gloo, toy shapes, a few docs), so that the path cannot rot;
and the carried wheels checked against what the project and the wheels themselves need.

`.gpu-carry/` comes from `make gpu-carry` (a prerequisite of `make test`): outside CI a missing
folder skips these tests with that command; in CI (CI set) it fails them."""

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
CARRY = REPO / ".gpu-carry"
SCRIPTS = REPO / "scripts"


def _names(path: Path) -> set[str]:
    """Normalised distribution names of a requirements file (comments and versions dropped)."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {_normal(re.split(r"[=<>!~\[; ]", line)[0]) for line in lines if line}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def carry() -> Path:
    if not (CARRY / ".complete").is_file():
        message = f"{CARRY} is missing: run `make gpu-carry`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CARRY


def test_carried_wheels_and_image_cover_every_dependency(carry):
    """What the project and each carried wheel require is on the GPU machine's image or carried
    (never torch or numpy, which the image has), and each listed wheel is there for Python 3.12."""
    image, carried = _names(SCRIPTS / "gpu_image_packages.txt"), _names(SCRIPTS / "gpu_wheels.txt")
    assert {"torch", "numpy"}.isdisjoint(carried)
    available = image | carried | {"torch"}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    needed = {_normal(re.split(r"[=<>!~\[; ]", requirement)[0]) for requirement in project}
    wheels = sorted((carry / "wheels").glob("*.whl"))
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
            for line in archive.read(metadata).decode().splitlines():
                if line.startswith("Requires-Dist:") and "extra ==" not in line and "python_version <" not in line:
                    needed.add(_normal(re.split(r"[=<>!~\[; (]", line.split(":", 1)[1].strip())[0]))
    assert sorted(needed - available) == []
    for name in carried:
        tags = [w.name.split("-")[-3] for w in wheels if _normal(w.name.split("-")[0]) == name]
        assert any(tag in ("py3", "py312", "cp312") for tag in tags), (name, tags)


@pytest.mark.timeout(600)
def test_dry_gpu_check_passes_and_writes_its_report(carry, tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_SITE": str(site), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # the script puts the checkout (and the carried wheels) on it
    out = tmp_path / "out"
    command = ["bash", str(SCRIPTS / "gpu_check.sh"), "--dry", "--out", str(out), "--work", str(tmp_path / "work")]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=580)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["failures"] == []
    # the carried wheels were installed with --no-index into SITE and are the ones imported
    origins = report["environment"]["carried_from"]
    assert set(origins) == _names(SCRIPTS / "gpu_wheels.txt")
    assert all(path.startswith(str(site)) for path in origins.values()), origins
    compared = {c["compared"] for c in report["comparisons"]}
    assert compared == {
        "random fp32: device vs cpu",
        "random bf16: device vs cpu fp32",
        "trained fp32: device vs cpu",
        "trained bf16: device vs cpu fp32",
    }
    trained = next(c for c in report["comparisons"] if c["compared"] == "trained fp32: device vs cpu")
    assert trained["tasks"]["custom|check_counting_continue|0"]["generations_equal"] == 1.0
    training = report["training"]
    assert training["bitwise_equal"] and training["evaluated_steps"] == [2, 4]
    assert training["hook_cost"]["cost_train_steps"] > 0
    memory = report["memory"]  # the unbounded token budget, cut by the dry profile's memory_budget_gb
    assert memory["bitwise_equal"] and [entry["step"] for entry in memory["evaluations"]] == [2, 4]
    ((planned,), (used,)) = memory["evaluations"][0]["before"], memory["evaluations"][0]["after"]
    assert planned["tokens_per_batch"] == 10**9 and used["tokens_per_batch"] < planned["largest"]
    assert used["largest"] <= used["tokens_per_batch"] < planned["largest"]
    assert memory["evaluations"][1]["before"] == memory["evaluations"][1]["after"] == [used]  # the cut plan kept
    assert {entry["max_abs_diff"] for tasks in memory["steps"].values() for entry in tasks.values()} == {0.0}
    figures = report["figures"]
    assert figures["bf16_matmul_peak"]["flop_per_s"] > 0
    assert {"multi-token", "generative", "mix"} <= set(figures["shapes"]["smollm2-mini"]["kinds"])
    baseline = figures["transformers_baseline"]
    assert baseline["scored_docs"] > 0 and baseline["generated_docs"] > 0 and baseline["seconds"] > 0
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "logs.tar.gz", "summary.txt"]
    summary = (out / "summary.txt").read_text()
    assert "RESULT: PASSED" in summary and "bitwise equal: True" in summary
    assert "training bitwise equal to the training without evaluation: True" in summary


def test_help_builds_nothing(tmp_path):
    """`gpu_check.sh --help` prints the usage and the check's options, installs and writes nothing."""
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CARRY": str(tmp_path / "absent")}
    command = ["bash", str(SCRIPTS / "gpu_check.sh"), "--help"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--no-index" in done.stdout and "usage: gpu_check.py" in done.stdout
    assert list(tmp_path.iterdir()) == []
