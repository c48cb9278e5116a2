"""The overview image: one panel per task plus the loss, chance read from the details."""

import json

from lighteval_nanotron.tracking.overview_plot import chance_levels, plot_overview
from lighteval_nanotron.tracking.training_loss import TrainingLossLog, read_training_loss


def _results(root, step, acc):
    folder = root / "results" / "m" / str(step)
    folder.mkdir(parents=True, exist_ok=True)
    content = {
        "config_general": {"model_name": "m", "training_step": step},
        "results": {"t|mc|0": {"acc": acc, "acc_stderr": 0.05}, "all": {"acc": acc}},
    }
    (folder / "results_2024-01-01T00-00-00.json").write_text(json.dumps(content))


def test_overview_with_loss_and_chance(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for step, acc in ((0, 0.3), (10, 0.9)):
        _results(tmp_path, step, acc)
    details = tmp_path / "details" / "m" / "0" / "2024-01-01T00-00-00"
    details.mkdir(parents=True)
    rows = {"task_name": ["t|mc|0"] * 2, "sampling_method": ["LOGPROBS"] * 2, "choices": [["a", "b"], list("abcd")]}
    pq.write_table(pa.table(rows), details / "details_t|mc|0_2024-01-01T00-00-00.parquet")
    assert chance_levels(tmp_path, "m") == {"t|mc|0": {"acc*": (1 / 2 + 1 / 4) / 2}}
    log = TrainingLossLog(tmp_path, "m")
    for step, loss in ((1, 5.0), (6, 3.0), (6, 2.5)):
        log.append(step, step * 100, loss)
    assert read_training_loss(log.path) == [(1, 5.0), (6, 2.5)]
    path = plot_overview(tmp_path, "m")
    assert path == tmp_path / "plots" / "overview.png" and path.read_bytes()[:4] == b"\x89PNG"


def test_the_chance_line_is_the_one_the_results_record(tmp_path):
    """Docs with two golds among four choices: chance 0.5 (golds / choices, as the results record it
    and the signal measures against), where the details' 1 / choices drew 0.25."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _results(tmp_path, 0, 0.6)
    path = tmp_path / "results" / "m" / "0" / "results_2024-01-01T00-00-00.json"
    content = json.loads(path.read_text())
    content["config_tasks"] = {"t|mc|0": {"chance": {"acc": 0.5, "acc_centered": 0.0}}}
    path.write_text(json.dumps(content))
    details = tmp_path / "details" / "m" / "0" / "2024-01-01T00-00-00"
    details.mkdir(parents=True)
    rows = {"task_name": ["t|mc|0"], "sampling_method": ["LOGPROBS"], "choices": [list("abcd")]}
    pq.write_table(pa.table(rows), details / "details_t|mc|0_2024-01-01T00-00-00.parquet")
    assert chance_levels(tmp_path, "m") == {"t|mc|0": {"acc": 0.5, "acc_centered": 0.0}}
