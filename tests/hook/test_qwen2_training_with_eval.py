"""Current Nanotron's Qwen2 (dense, and MoE with expert parallelism 1) trained by main's own
`DistributedTrainer` with the `lighteval_nanotron:` section: the loss curve and final weights are
bitwise those of the same run without the hook, and, starting every layout from the same
checkpoint on the same batches, the loss curve and the per-sample log-probs at every evaluated
step are the same at TP1, TP2, PP2, TP2xPP2 and DP2. Needs GitHub main (0.4 has no Qwen2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.checkpoint_eval.details_check import read_details
from tests.helpers.distributed import run_distributed
from tests.helpers.nanotron_main import requires_qwen2
from tests.hook.training_runs import (
    MODEL_NAME,
    QWEN2_MODEL_CONFIG,
    QWEN2_MOE_MODEL_CONFIG,
    TASKS,
    assert_finite_results,
    results_files,
    train_worker,
    write_config,
)

pytestmark = requires_qwen2
TOLERANCE = 1e-4
STEPS = [0, 2, 4]
SECTION = {"eval_at_start": True}
MODEL_CONFIGS = {"dense": QWEN2_MODEL_CONFIG, "moe": QWEN2_MOE_MODEL_CONFIG}
LAYOUTS = {"tp2": (2, 1, 1), "pp2": (1, 2, 1), "tp2pp2": (2, 2, 1), "dp2": (1, 1, 2)}
"""Compared with TP1. PP > 1 trains through Qwen2's CPU needs (`models/families/qwen2/cpu_needs.py`),
which fix main's `Qwen2Model.forward` off the input stage (qwen.py:766 at 2411b02, docs/cpu.md)."""
GLOBAL_BATCH = 4
"""Samples per step at every layout (micro-batches of 2; accumulation 2, or DP2), so every layout
trains on the same batches."""


class Runs:
    """Training runs of one tiny Qwen2 from one random checkpoint, each made once per module."""

    def __init__(self, folder: Path, model_config: dict, init: Path) -> None:
        self.folder, self.model_config, self.init = folder, model_config, init
        self._reports: dict[tuple, list] = {}

    def output_dir(self, layout: tuple[int, int, int]) -> Path:
        return self.folder / "_".join(map(str, layout)) / "eval"

    def reports(self, layout: tuple[int, int, int], evaluate: bool = True) -> list:
        key = (layout, evaluate)
        if key not in self._reports:
            tp, pp, dp = layout
            folder = self.folder / "_".join(map(str, layout))
            folder.mkdir(exist_ok=True)
            config = write_config(folder, tp=tp, pp=pp, dp=dp, train_steps=4, section=SECTION, evaluate=evaluate,
                                  model_config=self.model_config, init_checkpoint=self.init,
                                  batch_accumulation_per_replica=GLOBAL_BATCH // (2 * dp),
                                  name="hook.yaml" if evaluate else "plain.yaml")  # fmt: skip
            self._reports[key] = run_distributed(train_worker, tp * pp * dp, str(config), timeout=300)
        return self._reports[key]


@pytest.fixture(scope="module", params=sorted(MODEL_CONFIGS))
def runs(request, tmp_path_factory) -> Runs:
    from lighteval_nanotron.checkpoints.format import CheckpointModel
    from tests.helpers.tiny_model import make_tiny_checkpoint

    model_config = MODEL_CONFIGS[request.param]
    folder = tmp_path_factory.mktemp(f"qwen2_{request.param}")
    make_tiny_checkpoint(folder / "init", CheckpointModel.from_fields(model_config).model_config)
    return Runs(folder, model_config, folder / "init")


def _logprobs(output_dir: Path) -> dict[int, dict[str, list]]:
    """Step -> task -> each doc's choice log-probs, from the details files."""
    details = output_dir / "details" / MODEL_NAME
    return {
        int(step.name): {task: [row["logprobs"] for row in rows] for task, rows in read_details(step).items()}
        for step in sorted(details.iterdir())
    }


def _check_hooked(reports: list, output_dir: Path) -> None:
    for report in reports:
        assert report["evaluated"] == STEPS and report["failures"] == [], report
    found = results_files(output_dir)
    assert sorted(found) == STEPS
    for step, content in found.items():
        assert_finite_results(content, TASKS)
        assert content["config_general"]["consumed_tokens"] == step * GLOBAL_BATCH * 32  # sequence length 32


def _curve(reports: list) -> list:
    """The loss curve, from a rank of the output stage."""
    (curve, *_) = [report["losses"] for report in reports if report["losses"][0] is not None]
    return curve


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_training_is_undisturbed_by_the_hook(runs, name):
    """Losses and final weights bitwise those of the run without the hook, on every rank."""
    hooked, plain = runs.reports(LAYOUTS[name]), runs.reports(LAYOUTS[name], evaluate=False)
    _check_hooked(hooked, runs.output_dir(LAYOUTS[name]))
    for with_hook, without in zip(hooked, plain, strict=True):
        assert with_hook["losses"] == without["losses"]  # bitwise: floats compared exactly
        assert with_hook["params"] == without["params"]
    assert len(_curve(hooked)) == 4


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_results_equal_tp1(runs, name):
    """The same checkpoint trained 4 steps on the same batches at TP1 and at `name`: the same loss
    curve, and the same per-sample log-probs at steps 0, 2 and 4."""
    baseline, other = runs.reports((1, 1, 1)), runs.reports(LAYOUTS[name])
    _check_hooked(baseline, runs.output_dir((1, 1, 1)))
    _check_hooked(other, runs.output_dir(LAYOUTS[name]))
    assert _curve(other) == pytest.approx(_curve(baseline), abs=1e-5)
    assert _curve(baseline)[-1] < _curve(baseline)[0]
    want, got = _logprobs(runs.output_dir((1, 1, 1))), _logprobs(runs.output_dir(LAYOUTS[name]))
    assert sorted(got) == sorted(want) == STEPS
    for step, tasks in want.items():
        assert got[step].keys() == tasks.keys() == set(TASKS), step
        for task, rows in tasks.items():
            for got_row, want_row in zip(got[step][task], rows, strict=True):
                assert got_row == pytest.approx(want_row, abs=TOLERANCE), (name, step, task)
