"""Bad inputs fail early, with a message naming the fix, on every rank together (no rank hangs)."""

import json
import shutil
from pathlib import Path

import torch.distributed as dist
import yaml

from tests.helpers.distributed import run_distributed

GOOD_TASK = "lighteval|arc:easy|0"


def _evaluate_each(cases: list) -> list:
    """run_distributed worker: run every case; (error type, message) of each, in order.
    A case is (config kwargs, {world rank: kwargs overrides}), so ranks can disagree."""
    from lighteval_nanotron.checkpoint_eval import CheckpointEvalConfig, evaluate_checkpoints

    outcomes = []
    for kwargs, per_rank in cases:
        kwargs = {**kwargs, **per_rank.get(dist.get_rank(), {})}
        try:
            evaluate_checkpoints(CheckpointEvalConfig(**kwargs))
            outcomes.append(("ok", ""))
        except Exception as error:  # noqa: BLE001 - the outcome is what is checked
            outcomes.append((type(error).__name__, str(error)))
    return outcomes


def _broken_copies(checkpoint: Path, root: Path) -> dict:
    """Copies of a good checkpoint, each broken in one way."""
    copies = {}
    for name in ("corrupt_config", "no_tokenizer", "bad_tokenizer", "wrong_weights"):
        copies[name] = root / name
        shutil.copytree(checkpoint, copies[name])
    (copies["corrupt_config"] / "model_config.json").write_text("{not json")
    for name in ("no_tokenizer", "bad_tokenizer"):
        for file in ("tokenizer.json", "tokenizer_config.json"):
            (copies[name] / file).unlink()
        config = yaml.safe_load((copies[name] / "config.yaml").read_text())
        config["tokenizer"]["tokenizer_name_or_path"] = None if name == "no_tokenizer" else str(root / "nowhere")
        (copies[name] / "config.yaml").write_text(yaml.safe_dump(config))
    fields = json.loads((copies["wrong_weights"] / "model_config.json").read_text())
    (copies["wrong_weights"] / "model_config.json").write_text(json.dumps({**fields, "intermediate_size": 64}))
    return copies


def test_errors_are_raised_on_every_rank_together(tiny_converted, tmp_path):
    _, checkpoint = tiny_converted
    broken = _broken_copies(checkpoint, tmp_path)
    base = dict(tasks=GOOD_TASK, checkpoint=str(checkpoint), tp=2, cpu=True, max_samples=2, data_dirs=["bundled"],
                output_dir=str(tmp_path / "out"))  # fmt: skip
    cases = [
        ({**base, "tp": 1}, {}),
        ({**base, "tasks": "lighteval|no_such_task|0"}, {}),
        ({**base, "checkpoint": str(tmp_path / "missing")}, {}),
        ({**base, "checkpoint": str(broken["corrupt_config"])}, {}),
        ({**base, "checkpoint": str(broken["no_tokenizer"])}, {}),
        ({**base, "checkpoint": str(broken["bad_tokenizer"])}, {}),
        ({**base, "checkpoint": str(broken["wrong_weights"])}, {}),
        ({**base, "checkpoints_dir": str(tmp_path / "nothing_here"), "checkpoint": None}, {}),
        ({**base, "use_chat_template": True}, {}),  # the tiny tokenizer has no chat template
        (base, {1: {"tasks": "lighteval|no_such_task|0"}}),  # only world rank 1 fails
        (base, {}),  # and the group still works afterwards
    ]
    rank0, rank1 = run_distributed(_evaluate_each, 2, cases, timeout=240)
    expected = [
        ("LayoutError", "processes, but 2 were launched"),
        ("UnknownTaskError", "no_such_task"),
        ("CheckpointError", "does not exist"),
        ("CheckpointError", "model config"),
        ("ConfigError", "Pass --tokenizer"),
        ("ConfigError", "The tokenizer folder"),
        ("CheckpointError", "but its model config gives"),
        ("CheckpointError", "does not exist"),
        ("ConfigError", "A chat template was asked for, but the tokenizer"),
    ]
    for index, (kind, text) in enumerate(expected):
        for outcome in (rank0[index], rank1[index]):
            assert outcome[0] == kind and text in outcome[1], (index, outcome)
    assert rank0[9][0] == "EvaluationError" and "world rank 1" in rank0[9][1] and "no_such_task" in rank0[9][1]
    assert rank1[9][0] == "UnknownTaskError"
    assert rank0[10] == rank1[10] == ("ok", "")
